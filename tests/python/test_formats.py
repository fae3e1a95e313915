# SPDX-License-Identifier: Apache-2.0
"""The exact number-format functions against independent numpy implementations of docs/numerics.md."""
import numpy as np
import pytest

import megamoe
from format_reference import bf16_bits, bf16_value, decode_codes, encode_nearest, decode_table, mx_reference, unpack_nibbles


def special_f32():
    return np.array([0.0, -0.0, 1.0, -1.0, 1.00390625, 1.01171875, 3.0e38, -3.4e38, 1e-40, -1e-45, np.inf,
                     -np.inf, 65504.0, 65520.0, 448.0, 464.0, 465.0, 57344.0, 61440.0, 6.0, 7.0, 0.25, 0.75],
                    np.float32)


def test_bf16_matches_rounding_rule(rng):
    raw = rng.integers(0, 2**32, 200000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([raw, special_f32(), rng.standard_normal(1000).astype(np.float32)])
    got = megamoe.to_bf16(x)
    assert got.dtype == np.uint16 and got.shape == x.shape
    np.testing.assert_array_equal(got, bf16_bits(x))
    # decoding is exact: the code's value is the top half of the F32 pattern
    codes = np.arange(65536, dtype=np.uint16)
    dec = megamoe.bf16_to_f32(codes)
    ok = ~np.isnan(bf16_value(codes))
    np.testing.assert_array_equal(dec.view(np.uint32)[ok], bf16_value(codes).view(np.uint32)[ok])
    assert np.all(np.isnan(dec[~ok]))


def test_f16_matches_ieee(rng):
    x = np.concatenate([rng.standard_normal(50000).astype(np.float32) * 1000, special_f32()])
    x = x[~np.isnan(x)]
    got = megamoe.to_f16(x)
    with np.errstate(over="ignore"):
        ref = x.astype(np.float16)
    np.testing.assert_array_equal(got, ref.view(np.uint16))  # numpy's IEEE RNE
    np.testing.assert_array_equal(megamoe.f16_to_f32(got), ref.astype(np.float32))


@pytest.mark.parametrize("kind", ["fp8_e4m3fn", "fp8_e5m2", "fp4_e2m1"])
def test_element_encode_decode(kind, rng):
    table, sign_bit, bits = decode_table(kind)
    top = max(table.values())
    x = np.concatenate([(rng.standard_normal(3000) * top / 3).astype(np.float32),
                        np.array(sorted(table.values()), np.float32),
                        # exact midpoints between neighbours: ties to the even code
                        np.array([(a + b) / 2 for a, b in zip(sorted(table.values()), sorted(table.values())[1:])],
                                 np.float32),
                        np.array([top * 1.1, -top * 3, 0.0, -0.0], np.float32)])
    got = megamoe.encode(x, kind)
    if bits == 4:
        got = unpack_nibbles(got, len(x))
    np.testing.assert_array_equal(got, encode_nearest(x, table, sign_bit))
    codes = np.arange(2 ** bits, dtype=np.uint8)
    packed = codes if bits == 8 else (codes[0::2] | (codes[1::2] << 4)).astype(np.uint8)
    want = decode_codes(codes, kind)
    dec = megamoe.decode(packed, kind)
    np.testing.assert_array_equal(np.isnan(dec), np.isnan(want))
    np.testing.assert_array_equal(dec[~np.isnan(want)], want[~np.isnan(want)].astype(np.float32))


def test_specials_of_fp8():
    assert list(megamoe.encode(np.array([np.nan, np.inf, -np.inf], np.float32), "fp8_e4m3fn")) == [0x7F, 0x7F, 0xFF]
    assert list(megamoe.encode(np.array([np.inf, -np.inf], np.float32), "fp8_e5m2")) == [0x7C, 0xFC]
    assert list(megamoe.encode(np.array([464.0, 465.0], np.float32), "fp8_e4m3fn")) == [0x7E, 0x7E]  # 448


@pytest.mark.parametrize("kind", ["fp8_e4m3fn", "fp8_e5m2", "fp4_e2m1"])
@pytest.mark.parametrize("n", [32, 40, 67])
def test_mx_quantize_matches_rule(kind, n, rng):
    x = (rng.standard_normal((6, n)) * np.exp2(rng.integers(-20, 20, (6, 1)))).astype(np.float32)
    x[1, :] = 0.0
    x[2, :5] = 1e-39  # BF16 subnormals in a group of otherwise normal values
    q, s = megamoe.mx_quantize(x, kind)
    want_q, want_s = mx_reference(x, kind)
    np.testing.assert_array_equal(s, want_s)
    got_q = unpack_nibbles(q, n) if kind == "fp4_e2m1" else q
    np.testing.assert_array_equal(got_q, want_q)
    # the BF16 entry point gives the same bytes
    q2, s2 = megamoe.mx_quantize(bf16_bits(x), kind)
    np.testing.assert_array_equal(q2, q)
    np.testing.assert_array_equal(s2, s)
    # dequantize: value * 2^(b - 127), one rounding
    deq = megamoe.mx_dequantize(q, s, kind, n)
    scale = np.exp2(np.repeat(s.astype(np.float64) - 127, 32, axis=-1)[:, :n])
    np.testing.assert_array_equal(deq, (decode_codes(want_q, kind) * scale).astype(np.float32))


def test_mx_spec_example_and_specials():
    assert megamoe.mx_scale_byte(0.0, "fp8_e4m3fn") == 0
    assert megamoe.mx_scale_byte(np.inf, "fp8_e4m3fn") == 0xFF
    x = np.zeros(32, np.float32)
    x[3] = np.nan
    q, s = megamoe.mx_quantize(x, "fp8_e4m3fn")
    assert s[0] == 0xFF and q[3] == 0x7F
    assert np.all(np.isnan(megamoe.mx_dequantize(q, s, "fp8_e4m3fn")))


def round_half_away(v):
    t = np.trunc(v)
    return np.where(np.abs(v - t) >= 0.5, t + np.sign(v), t)


@pytest.mark.parametrize("rule", ["div_away", "mul_even"])
def test_int8_per_token(rule, rng):
    x = (rng.standard_normal((50, 77)) * np.exp2(rng.integers(-8, 8, (50, 1)))).astype(np.float32)
    x[0] = 0
    x[1, :4] = [127, -63.5, 0.5, 1]  # exact ties of x / s (s = 1)
    q, scale = megamoe.int8_quantize(x, rule)
    amax = np.abs(x).max(axis=1).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        if rule == "div_away":
            s = (amax / np.float32(127)).astype(np.float32)
            v = (x / s[:, None]).astype(np.float32)
            want = round_half_away(v.astype(np.float64))
        else:
            m = (np.float32(127) / amax).astype(np.float32)
            want = np.rint((x * m[:, None]).astype(np.float32).astype(np.float64))
            s = (amax / np.float32(127)).astype(np.float32)
    want = np.clip(np.nan_to_num(want), -127, 127).astype(np.int8)
    np.testing.assert_array_equal(q, want)
    np.testing.assert_array_equal(scale, s)
    if rule == "mul_even":
        _, inv = megamoe.int8_quantize(x[2:], rule, "inv_mul")
        np.testing.assert_array_equal(inv, (np.float32(1) / m[2:]).astype(np.float32))
    # NaN row: scale NaN, q all 0
    bad = np.ones((1, 8), np.float32)
    bad[0, 2] = np.nan
    qb, sb = megamoe.int8_quantize(bad, rule)
    assert np.isnan(sb[0]) and not qb.any()


def test_int4_pack_unpack(rng):
    v = rng.integers(-8, 8, (5, 9)).astype(np.int8)
    p = megamoe.int4_pack(v)
    assert p.shape == (5, 5)
    nib = (v.astype(np.int16) & 0xF).astype(np.uint8)
    want = nib[:, 0::2].copy()
    want[:, :4] |= nib[:, 1::2] << 4
    np.testing.assert_array_equal(p, want)
    np.testing.assert_array_equal(megamoe.int4_unpack(p, 9), v)
    with pytest.raises(megamoe.InvalidArgumentError, match="8"):
        megamoe.int4_pack(np.array([1, 8], np.int8))
