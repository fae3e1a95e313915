/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_json.c: the strict JSON parser (structure, escapes, UTF-8, numbers, every rejection,
 * depth limit) and the literal helpers the case runner uses for attribute values. */

#include "io/json.h"
#include "testlib.h"

/* Parses text (given length) and expects failure with a message containing `needle`. */
static void expect_reject_n(const char *text, size_t len, const char *needle) {
    mm_json_doc *doc = NULL;
    mm_error err_store, *err = &err_store;
    mm_error_clear(err);
    CHECK_STATUS(mm_json_parse(text, len, &doc, err), MM_ERR_INVALID_FILE, err);
    CHECK(doc == NULL);
    CHECK_STR_CONTAINS(err->message, needle);
    mm_json_doc_free(doc);
}

static void expect_reject(const char *text, const char *needle) {
    expect_reject_n(text, strlen(text), needle);
}

static mm_json_doc *parse_ok(const char *text) {
    mm_json_doc *doc = NULL;
    mm_error err_store, *err = &err_store;
    mm_error_clear(err);
    CHECK_OK(mm_json_parse(text, strlen(text), &doc, err), err);
    return doc;
}

static void test_structure(void) {
    mm_json_doc *doc =
        parse_ok(" {\"a\": 1, \"b\": [true, false, null], \"c\": \"x\", \"d\": {}, \"e\": []}\r\n\t ");
    const mm_json_value *root = mm_json_doc_root(doc);
    CHECK(root && root->type == MM_JSON_OBJECT);
    if (!root) return;
    CHECK_EQ_INT(root->u.object.count, 5);
    CHECK(strcmp(root->u.object.members[0].key, "a") == 0); /* document order kept */
    CHECK(strcmp(root->u.object.members[4].key, "e") == 0);
    const mm_json_value *a = mm_json_object_get(root, "a"), *b = mm_json_object_get(root, "b");
    CHECK(a && a->type == MM_JSON_NUMBER && a->u.number.is_integer && a->u.number.magnitude == 1);
    CHECK_EQ_INT(a ? a->offset : 0, 7);
    CHECK(b && b->type == MM_JSON_ARRAY && b->u.array.count == 3);
    if (b && b->u.array.count == 3) {
        CHECK(b->u.array.items[0]->type == MM_JSON_BOOL && b->u.array.items[0]->u.boolean == 1);
        CHECK(b->u.array.items[1]->type == MM_JSON_BOOL && b->u.array.items[1]->u.boolean == 0);
        CHECK(b->u.array.items[2]->type == MM_JSON_NULL);
    }
    const mm_json_value *c = mm_json_object_get(root, "c");
    CHECK(c && c->type == MM_JSON_STRING && c->u.string.len == 1 && strcmp(c->u.string.chars, "x") == 0);
    CHECK(mm_json_object_get(root, "d")->u.object.count == 0);
    CHECK(mm_json_object_get(root, "e")->u.array.count == 0);
    CHECK(mm_json_object_get(root, "zz") == NULL);
    CHECK(mm_json_object_get(b, "a") == NULL); /* not an object */
    mm_json_doc_free(doc);

    /* Scalars are valid top-level values. */
    doc = parse_ok("\"top\"");
    CHECK(mm_json_doc_root(doc)->type == MM_JSON_STRING);
    mm_json_doc_free(doc);
}

static void test_strings(void) {
    /* Every escape; \u escapes of 1, 2, 3 UTF-8 bytes and a surrogate pair (U+1F600). */
    mm_json_doc *doc = parse_ok("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0041\\u00e9\\u20AC\\ud83d\\ude00\"");
    const mm_json_value *v = mm_json_doc_root(doc);
    static const unsigned char expect[] = {'"',  '\\', '/',  '\b', '\f', '\n', '\r', '\t', 'A',
                                           0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80};
    CHECK_EQ_INT(v->u.string.len, sizeof expect);
    CHECK(memcmp(v->u.string.chars, expect, sizeof expect) == 0);
    CHECK_EQ_INT(v->u.string.chars[sizeof expect], 0);
    mm_json_doc_free(doc);

    /* Raw UTF-8 of 2, 3 and 4 bytes passes through unchanged. */
    doc = parse_ok("\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
    CHECK_EQ_INT(mm_json_doc_root(doc)->u.string.len, 9);
    mm_json_doc_free(doc);

    /* \u0000 decodes to an embedded NUL that the length reports. */
    doc = parse_ok("\"a\\u0000b\"");
    CHECK_EQ_INT(mm_json_doc_root(doc)->u.string.len, 3);
    CHECK_EQ_INT(mm_json_doc_root(doc)->u.string.chars[1], 0);
    mm_json_doc_free(doc);

    expect_reject("\"\\ud800\"", "high surrogate not followed");
    expect_reject("\"\\ud800\\u0041\"", "high surrogate not followed");
    expect_reject("\"\\ud800x\"", "high surrogate not followed");
    expect_reject("\"\\udc00\"", "low surrogate without");
    expect_reject("\"\\u12\"", "4 hex digits");
    expect_reject("\"\\u12g4\"", "4 hex digits");
    expect_reject("\"\\x41\"", "invalid escape '\\x'");
    expect_reject("\"\\'\"", "invalid escape");
    expect_reject("\"a\nb\"", "control character 0x0a");
    expect_reject("\"a\tb\"", "control character 0x09");
    expect_reject("\"abc", "unterminated string");
    expect_reject("\"abc\\\"", "unterminated string");
    expect_reject("\"\xff\"", "invalid UTF-8 byte 0xff");
    expect_reject("\"\xc0\x80\"", "invalid UTF-8");         /* overlong NUL */
    expect_reject("\"\xe0\x80\xaf\"", "invalid UTF-8");     /* overlong '/' */
    expect_reject("\"\xed\xa0\x80\"", "invalid UTF-8");     /* encoded surrogate */
    expect_reject("\"\xf4\x90\x80\x80\"", "invalid UTF-8"); /* above U+10FFFF */
    expect_reject("\"\xe2\x82\"", "invalid UTF-8");         /* truncated sequence */
    expect_reject("\"\x80\"", "invalid UTF-8");             /* stray continuation byte */
    expect_reject("'single'", "unexpected '''");
}

static const mm_json_number *number_of(mm_json_doc *doc) {
    return &mm_json_doc_root(doc)->u.number;
}

static void test_numbers(void) {
    struct {
        const char *text;
        int is_integer, negative;
        uint64_t magnitude;
        double real;
    } cases[] = {
        {"0", 1, 0, 0, 0.0},
        {"-0", 1, 1, 0, -0.0},
        {"123", 1, 0, 123, 123.0},
        {"-45", 1, 1, 45, -45.0},
        {"1.5", 0, 0, 0, 1.5},
        {"1e3", 0, 0, 0, 1000.0},
        {"1E+2", 0, 0, 0, 100.0},
        {"-1.25e-2", 0, 1, 0, -0.0125},
        {"0.1", 0, 0, 0, 0.1},
        {"1e-06", 0, 0, 0, 1e-06},
        {"9223372036854775807", 1, 0, 9223372036854775807ull, 9223372036854775807.0},
        {"18446744073709551615", 1, 0, 18446744073709551615ull, 18446744073709551615.0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mm_json_doc *doc = parse_ok(cases[i].text);
        if (!doc) continue;
        const mm_json_number *n = number_of(doc);
        CHECK_EQ_INT(n->is_integer, cases[i].is_integer);
        CHECK_EQ_INT(n->negative, cases[i].negative);
        if (cases[i].is_integer) CHECK_EQ_HEX(n->magnitude, cases[i].magnitude);
        CHECK(n->real == cases[i].real); /* correctly rounded: exactly the compiler's constant */
        CHECK(!n->magnitude_overflow && !n->real_overflow);
        mm_json_doc_free(doc);
    }
    mm_json_doc *doc = parse_ok("18446744073709551616");
    CHECK(number_of(doc)->magnitude_overflow);
    mm_json_doc_free(doc);
    doc = parse_ok("1e400");
    CHECK(number_of(doc)->real_overflow);
    mm_json_doc_free(doc);
    doc = parse_ok("-1e400");
    CHECK(number_of(doc)->real_overflow);
    mm_json_doc_free(doc);
    doc = parse_ok("1e-400"); /* underflow to zero is a value, not an error */
    CHECK(!number_of(doc)->real_overflow && number_of(doc)->real == 0.0);
    mm_json_doc_free(doc);

    expect_reject("01", "leading zeros");
    expect_reject("-01", "leading zeros");
    expect_reject("1.", "expected a digit after the decimal point");
    expect_reject(".5", "unexpected '.'");
    expect_reject("+1", "unexpected '+'");
    expect_reject("-", "expected a digit");
    expect_reject("-x", "expected a digit");
    expect_reject("1e", "expected a digit in the exponent");
    expect_reject("1e+", "expected a digit in the exponent");
    expect_reject("NaN", "unexpected 'N'");
    expect_reject("Infinity", "unexpected 'I'");
    expect_reject("0x10", "expected the end of input after the JSON value");
}

static void test_syntax_errors(void) {
    expect_reject("", "unexpected end of input");
    expect_reject("   ", "unexpected end of input");
    expect_reject("{} x", "JSON at byte 3: unexpected 'x', expected the end of input after the JSON value");
    expect_reject("[1] ]", "expected the end of input after the JSON value");
    expect_reject("1 2", "expected the end of input after the JSON value");
    expect_reject_n("[1]\0", 4, "expected the end of input after the JSON value");
    expect_reject("[1,]", "JSON at byte 3: unexpected ']', expected a value");
    expect_reject("{\"a\":1,}", "expected a string key");
    expect_reject("{\"a\" 1}", "expected ':'");
    expect_reject("{a:1}", "expected a string key");
    expect_reject("{\"a\":1 \"b\":2}", "expected ',' or '}'");
    expect_reject("[1 2]", "expected ',' or ']'");
    expect_reject("[1, x]", "JSON at byte 4: unexpected 'x'");
    expect_reject("[", "unexpected end of input");
    expect_reject("{\"a\":", "unexpected end of input");
    expect_reject("tru", "invalid literal (expected true)");
    expect_reject("nul", "invalid literal (expected null)");
    expect_reject("fals", "invalid literal (expected false)");
    expect_reject("[\x01]", "unexpected byte 0x01");
    expect_reject("// c\n1", "unexpected '/'");
    /* Duplicate keys, also when they only match after escape decoding; same key in two objects is fine. */
    expect_reject("{\"a\":1,\"b\":2,\"a\":3}", "duplicate key \"a\"");
    expect_reject("{\"a\":1,\"\\u0061\":2}", "duplicate key \"a\"");
    mm_json_doc *doc = parse_ok("{\"a\":1,\"b\":{\"a\":2},\"ab\":3}");
    mm_json_doc_free(doc);
}

static void test_depth_limit(void) {
    char text[2 * (MM_JSON_MAX_DEPTH + 1) + 1];
    for (int depth = MM_JSON_MAX_DEPTH; depth <= MM_JSON_MAX_DEPTH + 1; depth++) {
        int at = 0;
        for (int i = 0; i < depth; i++) text[at++] = '[';
        for (int i = 0; i < depth; i++) text[at++] = ']';
        text[at] = '\0';
        if (depth == MM_JSON_MAX_DEPTH) {
            mm_json_doc_free(parse_ok(text));
        } else {
            expect_reject(text, "nesting deeper than 64 levels");
        }
    }
    /* Objects count too. */
    char objects[8 * (MM_JSON_MAX_DEPTH + 1) + 8];
    int at = 0;
    for (int i = 0; i <= MM_JSON_MAX_DEPTH; i++)
        at += snprintf(objects + at, sizeof objects - (size_t)at, "{\"k\":");
    at += snprintf(objects + at, sizeof objects - (size_t)at, "1");
    for (int i = 0; i <= MM_JSON_MAX_DEPTH; i++) objects[at++] = '}';
    objects[at] = '\0';
    expect_reject(objects, "nesting deeper");
}

static void test_literals(void) {
    mm_error err_store, *err = &err_store;
    mm_error_clear(err);
    int64_t i64 = 0;
    CHECK_OK(mm_json_literal_int64("metadata \"topk\"", "4", &i64, err), err);
    CHECK_EQ_INT(i64, 4);
    CHECK_OK(mm_json_literal_int64("x", " -7 ", &i64, err), err);
    CHECK_EQ_INT(i64, -7);
    CHECK_OK(mm_json_literal_int64("x", "-9223372036854775808", &i64, err), err);
    CHECK(i64 == INT64_MIN);
    CHECK_OK(mm_json_literal_int64("x", "9223372036854775807", &i64, err), err);
    CHECK(i64 == INT64_MAX);
    CHECK_STATUS(mm_json_literal_int64("x", "9223372036854775808", &i64, err), MM_ERR_INVALID_FILE, err);
    CHECK_STR_CONTAINS(err->message, "x = \"9223372036854775808\" is outside the 64-bit integer range");
    CHECK_STATUS(mm_json_literal_int64("x", "-9223372036854775809", &i64, err), MM_ERR_INVALID_FILE, err);
    CHECK_STATUS(mm_json_literal_int64("metadata \"topk\"", "4.5", &i64, err), MM_ERR_INVALID_FILE, err);
    CHECK_STR_CONTAINS(err->message, "metadata \"topk\" = \"4.5\" is not an integer");
    CHECK_STATUS(mm_json_literal_int64("k", "4e0", &i64, err), MM_ERR_INVALID_FILE, err);
    CHECK_STATUS(mm_json_literal_int64("k", "\"4\"", &i64, err), MM_ERR_INVALID_FILE, err);
    CHECK_STR_CONTAINS(err->message, "k = \"\\\"4\\\"\" is a string, not an integer");
    CHECK_STATUS(mm_json_literal_int64("k", "four", &i64, err), MM_ERR_INVALID_FILE, err);
    CHECK_STR_CONTAINS(err->message, "k = \"four\" is not valid JSON (JSON at byte 0");
    CHECK_STATUS(mm_json_literal_int64("k", "", &i64, err), MM_ERR_INVALID_FILE, err);
    CHECK_STATUS(mm_json_literal_int64("k", NULL, &i64, err), MM_ERR_INVALID_ARGUMENT, err);

    double d = 0;
    CHECK_OK(mm_json_literal_double("eps", "1e-06", &d, err), err);
    CHECK(d == 1e-06);
    CHECK_OK(mm_json_literal_double("eps", "3", &d, err), err);
    CHECK(d == 3.0);
    CHECK_STATUS(mm_json_literal_double("eps", "1e999", &d, err), MM_ERR_INVALID_FILE, err);
    CHECK_STR_CONTAINS(err->message, "eps = \"1e999\" is outside the range of a double");
    CHECK_STATUS(mm_json_literal_double("eps", "null", &d, err), MM_ERR_INVALID_FILE, err);
    CHECK_STR_CONTAINS(err->message, "is null, not a number");

    int b = -1;
    CHECK_OK(mm_json_literal_bool("flag", "true", &b, err), err);
    CHECK_EQ_INT(b, 1);
    CHECK_OK(mm_json_literal_bool("flag", "false", &b, err), err);
    CHECK_EQ_INT(b, 0);
    CHECK_STATUS(mm_json_literal_bool("flag", "1", &b, err), MM_ERR_INVALID_FILE, err);
    CHECK_STR_CONTAINS(err->message, "flag = \"1\" is a number, not true or false");
    CHECK_STATUS(mm_json_literal_bool("flag", "True", &b, err), MM_ERR_INVALID_FILE, err);

    double list[3] = {0};
    size_t count = 99;
    CHECK_OK(mm_json_literal_double_list("alpha", "[10.0, 1.702, 1.0]", list, 3, &count, err), err);
    CHECK_EQ_INT(count, 3);
    CHECK(list[0] == 10.0 && list[1] == 1.702 && list[2] == 1.0);
    CHECK_OK(mm_json_literal_double_list("alpha", "[]", list, 3, &count, err), err);
    CHECK_EQ_INT(count, 0);
    CHECK_STATUS(mm_json_literal_double_list("alpha", "[1, 2, 3, 4]", list, 3, &count, err),
                 MM_ERR_INVALID_FILE, err);
    CHECK_STR_CONTAINS(err->message, "has 4 elements, at most 3 are allowed");
    CHECK_STATUS(mm_json_literal_double_list("alpha", "[1, \"2\"]", list, 3, &count, err),
                 MM_ERR_INVALID_FILE, err);
    CHECK_STR_CONTAINS(err->message, "element 1 is a string, not a number");
    CHECK_STATUS(mm_json_literal_double_list("alpha", "1.0", list, 3, &count, err), MM_ERR_INVALID_FILE, err);
    CHECK_STR_CONTAINS(err->message, "is a number, not a list");

    int64_t ilist[4] = {0};
    CHECK_OK(mm_json_literal_int64_list("ids", "[0, -1, 7]", ilist, 4, &count, err), err);
    CHECK_EQ_INT(count, 3);
    CHECK(ilist[0] == 0 && ilist[1] == -1 && ilist[2] == 7);
    CHECK_STATUS(mm_json_literal_int64_list("ids", "[0, 1.5]", ilist, 4, &count, err), MM_ERR_INVALID_FILE,
                 err);
    CHECK_STR_CONTAINS(err->message,
                       "ids = \"[0, 1.5]\" is not a list of integers: element 1 is not an integer");
}

int main(void) {
    test_structure();
    test_strings();
    test_numbers();
    test_syntax_errors();
    test_depth_limit();
    test_literals();
    return mm_test_finish("test_json");
}
