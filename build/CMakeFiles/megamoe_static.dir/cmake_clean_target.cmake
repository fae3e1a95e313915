file(REMOVE_RECURSE
  "libmegamoe.a"
)
