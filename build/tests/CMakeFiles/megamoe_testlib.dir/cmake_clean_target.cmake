file(REMOVE_RECURSE
  "libmegamoe_testlib.a"
)
