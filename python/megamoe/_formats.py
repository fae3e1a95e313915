# SPDX-License-Identifier: Apache-2.0
"""The exact number formats of megamoe (include/megamoe/formats.h, docs/numerics.md) on whole arrays.

Rows are the last dimension. BF16 and F16 codes are numpy uint16 arrays (F16 may also be given as
numpy float16); packed 4-bit outputs have ceil(n/2) bytes per row. Each call releases the GIL.
"""
import numpy as np

from . import _megamoe as _c
from ._arrays import PACKED4, empty, spec, to_numpy

_MX_ELEMS = ("fp8_e4m3fn", "fp8_e5m2", "fp4_e2m1")


def _canonical(dtype):
    return _c.dtype_info(dtype)[0]


def encode(x, dtype):
    """F32 values -> codes of dtype (bf16, f16, fp8_e4m3fn, fp8_e5m2, fp4_e2m1), exact RNE + saturation.
    Returns uint16 codes for bf16/f16, uint8 codes (fp8), or packed uint8 bytes (fp4_e2m1)."""
    dtype = _canonical(dtype)
    x = np.ascontiguousarray(to_numpy(x, "x")[0], dtype=np.float32)
    scalar_shape = x.shape
    if x.ndim == 0:
        x = x.reshape(1)
    out = empty(x.shape, dtype)
    _c.convert(spec(x, "x", "f32"), spec(out, "out", dtype, x.shape))
    if dtype == "f16":
        out = out.view(np.uint16)  # codes, like bf16 (.view(np.float16) gives numpy halves)
    return out.reshape(scalar_shape) if not scalar_shape else out


def decode(codes, dtype, n=None):
    """Codes of dtype -> F32 values (exact). For packed 4-bit codes, n is the logical last dimension
    (default: two per byte)."""
    dtype = _canonical(dtype)
    arr = np.ascontiguousarray(to_numpy(codes, "codes")[0])
    if dtype == "f16" and arr.dtype == np.uint16:
        arr = arr.view(np.float16)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    shape = arr.shape
    if dtype in PACKED4:
        shape = shape[:-1] + (2 * shape[-1] if n is None else n,)
    out = np.empty(shape, np.float32)
    _c.convert(spec(arr, "codes", dtype, shape), spec(out, "out", "f32"))
    return out


def to_bf16(x):
    """F32 -> BF16 codes (uint16), round to nearest even; NaN quieted."""
    return encode(x, "bf16")


def bf16_to_f32(codes):
    """BF16 codes (uint16 or torch.bfloat16) -> F32 (exact)."""
    return decode(codes, "bf16")


def round_bf16(x):
    """F32 values rounded to the nearest BF16 (ties to even), as F32."""
    return bf16_to_f32(to_bf16(x))


def to_f16(x):
    """F32 -> F16 codes (uint16): RNE, overflow to Inf. .view(np.float16) gives numpy halves."""
    return encode(x, "f16")


def f16_to_f32(codes):
    return decode(codes, "f16")


def mx_quantize(x, elem="fp8_e4m3fn"):
    """MX block-32 quantization of each row of x (F32 values, which are first rounded to BF16, or BF16
    codes / torch.bfloat16) into (q, scales): q holds elem codes (uint8; fp4_e2m1 packed, low nibble
    first), scales E8M0 bytes, shape (..., ceil(n/32))."""
    elem = _canonical(elem)
    if elem not in _MX_ELEMS:
        raise _c.InvalidArgumentError(f"elem '{elem}' is not an MX element type {_MX_ELEMS}")
    arr, implied = to_numpy(x, "x")
    if implied != "bf16" and arr.dtype != np.uint16:
        arr = np.ascontiguousarray(arr, dtype=np.float32)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    n = arr.shape[-1]
    q = empty(arr.shape, elem)
    scales = np.empty(arr.shape[:-1] + ((n + 31) // 32,), np.uint8)
    _c.mx_quantize(spec(arr, "x"), spec(q, "q", elem, arr.shape), spec(scales, "scales", "e8m0"))
    return q, scales


def mx_dequantize(q, scales, elem="fp8_e4m3fn", n=None):
    """q * 2^(scale - 127) per group of 32, as F32 (one rounding; scale 0xFF gives NaN). n: the logical
    row length (needed for fp4_e2m1 rows of odd length)."""
    elem = _canonical(elem)
    q = to_numpy(q, "q")[0]
    scales = to_numpy(scales, "scales")[0]
    shape = q.shape
    if elem in PACKED4:
        shape = shape[:-1] + (2 * shape[-1] if n is None else n,)
    out = np.empty(shape, np.float32)
    _c.mx_dequantize(spec(q, "q", elem, shape), spec(scales, "scales", "e8m0"), spec(out, "out", "f32"))
    return out


def mx_scale_byte(amax, elem="fp8_e4m3fn"):
    """The E8M0 scale byte of an MX group with this amax."""
    return _c.mx_scale_byte(float(amax), elem)


def int8_quantize(x, rule="div_away", scale_form="amax_div_127"):
    """INT8 per-token (per-row) quantization of F32 x: (q int8, scale f32 of shape x.shape[:-1]).
    rule: "div_away" (q = round_half_away(x / (amax/127))) or "mul_even" (q = rint(x * 127/amax)).
    scale_form (mul_even only): "amax_div_127" or "inv_mul" (1 / m, Dispatch V3's)."""
    forms = {"amax_div_127": 0, "inv_mul": 1}
    if scale_form not in forms:
        raise _c.InvalidArgumentError(f"scale_form '{scale_form}' (must be one of {tuple(forms)})")
    x = np.ascontiguousarray(to_numpy(x, "x")[0], dtype=np.float32)
    if x.ndim == 0:
        x = x.reshape(1)
    q = np.empty(x.shape, np.int8)
    scale = np.empty(x.shape[:-1], np.float32)
    _c.int8_quantize(spec(x, "x"), rule, forms[scale_form], spec(q, "q"), spec(scale, "scale", "f32", scale.shape or (1,)))
    return q, scale


def int4_pack(values):
    """int8 values in [-8, 7] -> packed INT4 bytes (element 2i in the low nibble), per row."""
    v = np.ascontiguousarray(to_numpy(values, "values")[0])
    if v.dtype != np.int8:
        if not np.issubdtype(v.dtype, np.integer):
            raise _c.InvalidArgumentError(f"values: dtype {v.dtype} (must be integer)")
        v = v.astype(np.int8) if v.size == 0 or (v.min() >= -128 and v.max() <= 127) else v
        if v.dtype != np.int8:
            raise _c.InvalidArgumentError("values: outside [-8, 7]")
    if v.ndim == 0:
        v = v.reshape(1)
    packed = empty(v.shape, "int4")
    _c.int4_pack(spec(v, "values"), spec(packed, "packed", "int4", v.shape))
    return packed


def int4_unpack(packed, n=None):
    """Packed INT4 bytes -> int8 values; n is the logical row length (default two per byte)."""
    p = np.ascontiguousarray(to_numpy(packed, "packed")[0])
    shape = p.shape[:-1] + (2 * p.shape[-1] if n is None else n,)
    values = np.empty(shape, np.int8)
    _c.int4_unpack(spec(p, "packed", "int4", shape), spec(values, "values"))
    return values
