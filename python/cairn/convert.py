"""Offline checkpoint conversion: ``cairn.convert(source, dest, to=...)``.

The same C++ call as ``cairn convert`` on the command line: the source's
format (Orbax, AXLearn, safetensors) is detected, arrays stream region by
region within ``memory_budget`` bytes, and the destination is committed
last, so an interrupted conversion leaves nothing that looks valid.
"""

from __future__ import annotations

import os
from typing import Callable, Mapping, Optional, Sequence, Union

from cairn import _core
from cairn import _leaves


def convert(
    source: Union[str, "os.PathLike[str]"],
    dest: Union[str, "os.PathLike[str]"],
    *,
    to: str,
    from_format: str = "",
    step: Optional[int] = None,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    rename: Mapping[str, str] | Sequence[tuple[str, str]] = (),
    dtype: Mapping[str, str] | Sequence[tuple[str, str]] = (),
    memory_budget: Union[int, str] = 1 << 30,
    threads: int = 0,
    verify: bool = False,
    overwrite: bool = False,
    max_file_size: Union[int, str] = 0,
    progress: Optional[Callable[[int, int, int, int], None]] = None,
    resume: bool = True,
    params_only: bool = False,
    rename_preset: str = "",
) -> dict:
    """Converts the checkpoint at ``source`` into format ``to`` at ``dest``.

    Args:
      source, dest: paths or kvstore URLs (``file:///...``, ``memory://...``).
      to: ``"orbax"`` (OCDBT + Zarr v3, Orbax's default), ``"orbax-zarr2"``
        (OCDBT + Zarr v2), ``"axlearn"`` or ``"safetensors"``. Orbax goes to
        ``dest/<step>/default`` (AXLearn sources: AXLearn's Orbax step
        ``dest/step_XXXXXXXX/state`` with ``index/index`` and iterator state).
      from_format: ``""`` to detect, or ``"orbax"``, ``"axlearn"``, ``"safetensors"``.
      step: the source step (default: the latest committed); also names the
        AXLearn destination step.
      include, exclude: globs on source array paths.
      rename: ``{old_prefix: new_prefix}`` applied to destination paths.
      dtype: ``{glob: dtype_name}`` casts (float types only), e.g. ``{"*": "bfloat16"}``.
      memory_budget: bytes of array data in flight: an int or a string such
        as ``"1GiB"`` or ``"512MiB"`` (units B, KiB, MiB, GiB, KB, MB, GB).
      threads: worker threads (0: the machine's cores).
      verify: re-read the destination and compare it with the source.
      overwrite: replace a destination that holds a committed checkpoint.
      max_file_size: safetensors only: shard into files of at most this many
        bytes (an int or a string such as ``"5GB"``).
      resume: keep the arrays that an interrupted run of the same conversion
        into ``dest`` completed (partial ones are written again); False
        writes everything again.
      params_only: keep only a training state's model parameters: the same as
        ``include=["params.*"]`` plus dropping the leading ``params.`` (and a
        second one, as MaxText's ``params.params.decoder...``) before
        ``rename_preset`` and ``rename`` apply.
      rename_preset: ``""`` or a named table of renames (and transposes)
        applied before ``rename``: ``"gpt2"`` turns a flax GPT-2
        (transformers' Flax module names, ``nn.Dense`` ``[in, out]``
        kernels) into transformers' ``GPT2LMHeadModel`` names
        (``.kernel``/``.scale``/``.embedding`` -> ``.weight``; transformers'
        FlaxConv1D ``[out, in]`` kernels are transposed); ``"llama"`` turns
        transformers' Flax Llama or Mistral names into its PyTorch
        models' and transposes every Dense kernel to a Linear weight
        (``[out, in]``).
      progress: called as ``progress(bytes_done, bytes_total, arrays_done, arrays_total)``.

    Returns:
      A summary dict: source, source_format, dest, arrays, arrays_resumed, bytes_read,
      bytes_written, seconds, verify_seconds, peak_slab_bytes.

    Raises:
      KeyboardInterrupt: within about a second of Ctrl-C (SIGINT). Nothing
        is committed; its note says how far the conversion got, and the
        same call run again resumes (Orbax and AXLearn destinations keep the
        arrays completed).
    """
    renames = list(rename.items()) if isinstance(rename, Mapping) else list(rename)
    casts = list(dtype.items()) if isinstance(dtype, Mapping) else list(dtype)
    return _core._convert(
        os.fspath(source), os.fspath(dest), to, from_format, step, list(include), list(exclude), renames,
        casts, _leaves.byte_size("memory_budget", memory_budget), int(threads), bool(verify),
        bool(overwrite), _leaves.byte_size("max_file_size", max_file_size), progress, bool(resume),
        bool(params_only), str(rename_preset))
