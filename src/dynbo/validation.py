"""Checks of user input shared by the policies, the harness and the command line.

Every check raises :class:`ValueError` naming the offending argument and value, never a
``TypeError``, ``OverflowError`` or ``RuntimeError`` from deeper down, so that callers can
promise "bad input is a ``ValueError`` and changes nothing".
"""

from __future__ import annotations

import enum
import math
import numbers
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch


#: the most dimensions of a box search: SciPy's Sobol sequence has 21201, and a
#: look-ahead acquisition searches time as one more
MAX_BOX_DIM = 21200


def _torch_type(value: Any, name: str) -> bool:
    """Whether ``value`` is an instance of ``torch.<name>``; torch is never imported for
    it (a value cannot be a tensor while torch is not loaded), so that the checks serve
    the benchmarks and the command line without loading torch."""
    torch_module = sys.modules.get("torch")
    return torch_module is not None and isinstance(value, getattr(torch_module, name))


__all__ = [
    "plain_value",
    "usable_device",
    "MAX_ABS_TIME",
    "boolean",
    "finite_number",
    "gamma_prior",
    "max_abs_target",
    "named_option",
    "parse_boolean_text",
    "positive_int",
    "real_array",
]

#: largest |t| a policy accepts (seconds or steps): about 31,700 years in seconds, and
#: far below the values at which time differences lose their digits in float64.
MAX_ABS_TIME = 1e12

_TRUE_WORDS = frozenset({"true", "yes", "1", "on"})
_FALSE_WORDS = frozenset({"false", "no", "0", "off"})


def _scalar(value: Any) -> Any:
    """Unwrap 0-d NumPy arrays and one-element, gradient-free torch scalars.

    NumPy's time types (``timedelta64`` counts as an integer to NumPy and to
    ``numbers.Integral``, but has a unit) come back as they are, for the checks to refuse.
    """
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if _torch_type(value, "Tensor") and value.ndim == 0:
        return value.detach().cpu().item()
    return value


def _is_time_type(value: Any) -> bool:
    return isinstance(value, (np.timedelta64, np.datetime64))


def named_option(name: str, convert: Callable[[Any], Any], value: Any) -> Any:
    """``convert(value)``, its ``ValueError`` prefixed with the option's ``name``.

    For converters that say what is wrong with a value but not which option held it
    (``as_family``: "unknown correlation family 'x'").
    """
    try:
        return convert(value)
    except ValueError as err:
        raise ValueError(f"{name}: {err}") from None


def shown_number(value: Any) -> str:
    """A number as a message shows it: an integer of hundreds of digits is cut."""
    text = repr(value)
    return text if len(text) <= 24 else f"{text[:12]}...({len(text)} digits)"


def finite_number(name: str, value: Any) -> float:
    """A finite real number (int, float, NumPy or torch scalar; not bool, str or complex).

    Raises:
        ValueError: for anything else, including integers too large for a float.
    """
    value = _scalar(value)
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, numbers.Real)
        or _is_time_type(value)
    ):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    try:
        out = float(value)
    except (OverflowError, ValueError):
        raise ValueError(f"{name} = {shown_number(value)} is too large to be a float") from None
    if not math.isfinite(out):
        raise ValueError(f"{name} must be finite, got {out}")
    return out


#: smallest ``time_step`` of a policy that counts time in steps of the clock: times up to
#: ``MAX_ABS_TIME`` in such steps stay finite in every kernel (``sigma_w^2 min(t, t')``
#: too).
MIN_TIME_STEP = 1e-9


def time_step(name: str, value: Any) -> float:
    """A clock time per step in ``[MIN_TIME_STEP, MAX_ABS_TIME]`` (``ValueError`` naming it)."""
    out = finite_number(name, value)
    if not MIN_TIME_STEP <= out <= MAX_ABS_TIME:
        raise ValueError(
            f"{name} must be in [{MIN_TIME_STEP:g}, {MAX_ABS_TIME:g}] (times up to "
            f"{MAX_ABS_TIME:g} in such steps stay finite), got {value!r}"
        )
    return out


def positive_number(name: str, value: Any) -> float:
    """A finite real number ``> 0``."""
    out = finite_number(name, value)
    if out <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return out


def at_most(
    name: str,
    value: Any,
    limit: float,
    convert: Callable[[str, Any], float] = positive_number,
) -> Any:
    """``convert(name, value)`` (default: a positive number) no larger than ``limit``.

    For options whose larger values would overflow or exhaust memory later (at a
    ``suggest``), refused when given instead.
    """
    out = convert(name, value)
    if out > limit:
        shown_limit = limit if isinstance(limit, int) else f"{limit:g}"
        raise ValueError(f"{name} must be at most {shown_limit}, got {shown_number(value)}")
    return out


#: largest concentration or rate of a Gamma prior on a lengthscale: its log density must
#: stay finite over the lengthscales a fit searches
MAX_PRIOR_PARAMETER = 1e6


def gamma_prior(
    name: str, value: Any, lengthscales: int
) -> tuple[float | tuple[float, ...], float | tuple[float, ...]] | None:
    """A Gamma prior ``(concentration, rate)`` on the spatial lengthscales, or ``None``.

    Each parameter is a positive number at most :data:`MAX_PRIOR_PARAMETER`, or a
    sequence of ``lengthscales`` of them (one per lengthscale: the kernel must have that
    many, i.e. ARD). Lists come back as tuples.

    Raises:
        ValueError: naming ``name`` (and the offending element).
    """
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ValueError(f"{name} must be a (concentration, rate) pair or None, got {value!r}")
    parts: list[float | tuple[float, ...]] = []
    for i, part in enumerate(value):
        label = f"{name}[{i}]"
        if isinstance(part, (list, tuple, np.ndarray)):
            if len(part) != lengthscales:
                raise ValueError(
                    f"{label} has {len(part)} values but the kernel has {lengthscales} "
                    "spatial lengthscale(s) (one value per dimension needs ard=True)"
                )
            parts.append(
                tuple(at_most(f"{label}[{j}]", v, MAX_PRIOR_PARAMETER) for j, v in enumerate(part))
            )
        else:
            parts.append(at_most(label, part, MAX_PRIOR_PARAMETER))
    return parts[0], parts[1]


def ordered_pair(
    name: str, value: Any, element: Callable[[str, Any], float] = finite_number
) -> tuple[float, float]:
    """A ``(low, high)`` pair with ``low < high``, each checked by ``element(name, v)``."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ValueError(f"{name} must be a (low, high) pair, got {value!r}")
    low, high = element(f"{name}[0]", value[0]), element(f"{name}[1]", value[1])
    if not low < high:
        raise ValueError(f"{name} must have low < high, got {value!r}")
    return low, high


def optional_number(name: str, value: Any) -> float | None:
    """``None`` or a finite real number (a time a policy may not have seen yet)."""
    return None if value is None else finite_number(name, value)


def count(name: str, value: Any) -> int:
    """A non-negative integer (a number of steps, observations, queries)."""
    value = _scalar(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def positive_int(name: str, value: Any) -> int:
    """A positive integer (int or NumPy integer; not bool)."""
    value = _scalar(value)
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, numbers.Integral)
        or _is_time_type(value)
        or value < 1
    ):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def boolean(name: str, value: Any) -> bool:
    """A real boolean (``True``/``False`` or a NumPy bool); ``"no"``, ``0`` or ``2`` are errors.

    A truthy string such as ``"no"`` silently meaning ``True`` is the failure this guards
    against; the command line converts words to booleans before they get here
    (:func:`parse_boolean_text`).
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ValueError(f"{name} must be true or false, got {value!r}")


def parse_boolean_text(text: str) -> bool | None:
    """``true/yes/on/1`` -> True, ``false/no/off/0`` -> False (any case), else ``None``."""
    word = text.strip().lower()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    return None


def _contains_bool(value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return True
    if isinstance(value, (list, tuple)):
        return any(_contains_bool(v) for v in value)
    return False


def real_array(name: str, value: Any) -> np.ndarray:
    """A float64 array from real numbers only (no strings, booleans, mappings or complex).

    Accepts nested sequences, NumPy arrays and torch tensors (also ones that require
    gradients: their values are taken, not their graph).
    """
    if _torch_type(value, "Tensor"):
        import torch

        if value.dtype == torch.bool or value.is_complex():
            raise ValueError(f"{name} must hold real numbers, got a {value.dtype} tensor")
        if value.layout != torch.strided or value.device.type == "meta":
            raise ValueError(
                f"{name} must be a dense tensor with values, got a {value.layout} tensor on "
                f"{value.device}"
            )
        # NumPy has no bfloat16 (nor float8): widen first, exactly
        value = value.detach().cpu().to(torch.float64).numpy()
    if isinstance(value, (str, bytes, Mapping)) or _contains_bool(value):
        raise ValueError(f"{name} must be an array of real numbers, got {value!r}")
    try:  # also a masked array inside a list
        masked = np.ma.is_masked(np.ma.asarray(value))
    except (TypeError, ValueError, RuntimeError):
        masked = False  # not an array at all: the conversion below says so
    if masked:
        # np.asarray drops the mask and would read the hidden values as data
        raise ValueError(f"{name} has masked entries; give only the values to use")
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"{name} must be an array of real numbers, got {value!r}") from None
    if arr.dtype.kind not in "iuf":
        shown = repr(value)
        shown = shown if len(shown) <= 200 else f"{shown[:200]}..."
        raise ValueError(f"{name} must hold real numbers, got {arr.dtype} values: {shown}")
    try:
        return arr.astype(float)
    except OverflowError:
        raise ValueError(f"{name} holds a number too large to be a float") from None


def max_abs_target(dtype: torch.dtype) -> float:
    """Largest |y| a model of ``dtype`` accepts: standardization squares the targets.

    ``1e150`` in float64 (squares up to ``1e300``) and ``1e18`` in float32 (squares up to
    ``1e36``, below float32's ``3.4e38``).
    """
    import torch

    return 1e150 if dtype == torch.float64 else 1e18


def plain_value(value: Any) -> Any:
    """``value`` as plain Python (lists, floats, str, dicts): how a policy records its options."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if _torch_type(value, "Tensor"):
        return value.detach().cpu().tolist()
    if isinstance(value, enum.Enum):  # before str: a str-valued enum is a str
        return plain_value(value.value)
    if isinstance(value, np.generic):  # NumPy scalars: np.bool_, np.str_, numbers
        return plain_value(value.item())
    if isinstance(value, str) and type(value) is not str:
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): plain_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    if isinstance(value, (set, frozenset)):
        # in a fixed order: the same options give the same saved state
        return [plain_value(v) for v in sorted(value, key=repr)]
    if _torch_type(value, "dtype"):
        return str(value).replace("torch.", "")
    if _torch_type(value, "device"):
        return str(value)
    if hasattr(value, "as_dict"):
        return value.as_dict()
    return value


def usable_device(device: Any) -> torch.device:
    """``device`` as a torch device on which a tensor can be allocated here.

    Raises:
        ValueError: for a malformed name, or a device this machine or PyTorch build
            does not have (``"cuda"`` without CUDA says so).
    """
    import torch

    if device is None or device == "":
        return torch.device("cpu")
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as err:
        raise ValueError(f"invalid device {device!r}: {err}") from None
    if parsed.type == "meta":
        # tensors there have no values: every fit and prediction would fail later
        raise ValueError(f"device {device!r} holds no data; use 'cpu', 'cuda' or 'mps'")
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r}: CUDA is not available on this machine")
    try:
        torch.empty(1, device=parsed)
    except (RuntimeError, AssertionError) as err:
        raise ValueError(f"device {device!r} is not usable: {err}") from None
    return parsed
