"""The comparison the Orbax tests rely on (orbax_helpers.assert_bit_equal)
can fail: scalars and 0-d arrays of another dtype, kind or value are caught.
Each must-fail case has its passing control beside it."""

import numpy as np
import pytest

import orbax_helpers as h


@pytest.mark.parametrize("expected,same,different", [
    # 0-d arrays keep their dtype (Orbax restores them as arrays)
    (np.array(9.0, np.float32), np.array(9.0, np.float32), np.array(9.0, np.float64)),
    (np.array(9.0, np.float32), np.array(9.0, np.float32), np.float32(9.0)),
    (np.array(3, np.uint8), np.array(3, np.uint8), np.array(3, np.int8)),
    (np.array(-0.0, np.float32), np.array(-0.0, np.float32), np.array(0.0, np.float32)),
    # numpy scalars: same dtype, or (as Orbax returns them) a Python scalar of the same kind
    (np.uint8(3), np.uint8(3), np.int16(3)),
    (np.uint8(3), 3, 3.0),
    (np.float16(1.5), 1.5, 1),
    (np.float32(2.5), np.float32(2.5), np.float32(2.25)),
    (np.bool_(True), True, 1),
    # Python scalars stay their type
    (11, 11, 11.0),
    (2.5, 2.5, np.float32(2.5)),
    (True, True, 1),
    (-0.0, -0.0, 0.0),
], ids=["0d-f32-vs-f64", "0d-vs-scalar", "0d-u8-vs-i8", "0d-negzero", "np-u8-vs-i16",
        "np-u8-vs-py-float", "np-f16-vs-py-int", "np-f32-value", "np-bool-vs-int",
        "int-vs-float", "float-vs-np-f32", "bool-vs-int", "negzero"])
def test_scalar_and_0d_comparison(expected, same, different):
    h.assert_bit_equal({"x": expected}, {"x": same})  # control
    with pytest.raises(AssertionError, match=r"\('x',\)"):
        h.assert_bit_equal({"x": expected}, {"x": different})


def test_strict_scalars_need_the_dtype():
    h.assert_bit_equal(np.uint8(3), np.uint8(3), scalars_loose=False)
    with pytest.raises(AssertionError, match=r"^\(\(\), <class 'int'>, .*<class 'numpy\.uint8'>"):
        h.assert_bit_equal(np.uint8(3), 3, scalars_loose=False)
