# SPDX-License-Identifier: Apache-2.0
"""Independent numpy implementations of the documented format rules (docs/numerics.md), written from
the rules and never calling megamoe."""
import numpy as np


def bf16_bits(x):
    """F32 -> BF16 by the documented rule: RNE on the bit pattern; NaN keeps its top bits, quiet bit set."""
    b = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF
    nan = np.isnan(np.asarray(x, np.float32))
    return np.where(nan, ((b >> 16) | 0x40) & 0xFFFF, rounded).astype(np.uint16)


def bf16_value(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def fp8_table(kind):
    """Every finite non-negative value of FP8 E4M3FN / E5M2, indexed by code (textbook formula)."""
    ebits, mbits, bias = (4, 3, 7) if kind == "fp8_e4m3fn" else (5, 2, 15)
    values = {}
    for code in range(128):
        e, m = code >> mbits, code & ((1 << mbits) - 1)
        if kind == "fp8_e4m3fn" and code == 0x7F:
            continue  # NaN
        if kind == "fp8_e5m2" and e == 31:
            continue  # Inf / NaN
        values[code] = (m / 2**mbits) * 2.0 ** (1 - bias) if e == 0 else (1 + m / 2**mbits) * 2.0 ** (e - bias)
    return values


FP4_VALUES = {0: 0.0, 1: 0.5, 2: 1.0, 3: 1.5, 4: 2.0, 5: 3.0, 6: 4.0, 7: 6.0}


def encode_nearest(x, table, sign_bit):
    """Round |x| (float64 exact) to the nearest table value, ties to the even code, beyond the largest
    finite value: the largest (saturation); sign kept."""
    codes = np.array(sorted(table, key=lambda c: table[c]))
    vals = np.array([table[c] for c in codes])
    out = []
    for v in np.asarray(x, np.float64).ravel():
        a = abs(v)
        i = np.searchsorted(vals, a)
        if i >= len(vals):
            c = codes[-1]
        elif i == 0 or vals[i] == a:
            c = codes[i]
        else:
            lo, hi = vals[i - 1], vals[i]
            if a - lo < hi - a:
                c = codes[i - 1]
            elif hi - a < a - lo:
                c = codes[i]
            else:
                c = codes[i - 1] if codes[i - 1] % 2 == 0 else codes[i]
        out.append(int(c) | (sign_bit if np.signbit(v) else 0))
    return np.array(out, np.uint8).reshape(np.shape(x))


def decode_table(kind):
    if kind == "fp4_e2m1":
        return FP4_VALUES, 0x8, 4
    return fp8_table(kind), 0x80, 8


def mx_reference(x_f32, kind):
    """MX block-32 from the rule in docs/numerics.md, for finite rows: (codes unpacked, scales)."""
    emax = {"fp8_e4m3fn": 8, "fp8_e5m2": 15, "fp4_e2m1": 2}[kind]
    table, sign_bit, _ = decode_table(kind)
    bits = bf16_bits(x_f32)
    v = bf16_value(bits).astype(np.float64)
    n = v.shape[-1]
    codes = np.zeros(v.shape, np.uint8)
    scales = np.zeros(v.shape[:-1] + ((n + 31) // 32,), np.uint8)
    for r in np.ndindex(v.shape[:-1]):
        for g in range((n + 31) // 32):
            block = v[r][g * 32:(g + 1) * 32]
            amax_bits = bits[r][g * 32:(g + 1) * 32] & 0x7FFF
            e = int(amax_bits.max()) >> 7
            if e == 0:
                continue  # scale 0, elements +0
            b = max(e - emax, 0)
            scales[r][g] = b
            codes[r][g * 32:g * 32 + len(block)] = encode_nearest(block * 2.0 ** (127 - b), table, sign_bit)
    return codes, scales


def unpack_nibbles(packed, n):
    p = np.asarray(packed, np.uint8)
    out = np.zeros(p.shape[:-1] + (2 * p.shape[-1],), np.uint8)
    out[..., 0::2] = p & 0x0F
    out[..., 1::2] = p >> 4
    return out[..., :n]


def decode_codes(codes, kind):
    table, sign_bit, _ = decode_table(kind)
    inf = 0x7C if kind == "fp8_e5m2" else None  # E5M2 keeps IEEE's Inf; its other top codes are NaN
    mag = np.vectorize(lambda c: np.inf if (int(c) & 0x7F) == inf else table.get(int(c) & (sign_bit - 1), np.nan))(codes)
    return np.where(codes & sign_bit, -mag, mag)
