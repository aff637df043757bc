"""Kernel limits are spec limits: what the schema allows but no kernel build can serve is refused when the spec is
loaded, with one line naming the field; widths the kernels handle by masking (96, 192) load and compile."""

import json

import pytest
import yaml
from cli_runner import assert_bad_input, integrate
from dayone.core.errors import InputError
from dayone.spec import kernel_limits
from dayone.spec.registry import load_spec, parse_spec, spec_to_dict


def edited(name: str, path: str, value) -> dict:
    data = spec_to_dict(load_spec(name))
    *parents, leaf = path.split(".")
    node = data
    for key in parents:
        node = node[key]
    node[leaf] = value
    return data


def test_tiles_are_powers_of_two_of_at_least_16():
    assert [kernel_limits.tile_width(w) for w in (1, 16, 17, 96, 128, 129, 192, 256, 257)] == [
        16,
        16,
        32,
        128,
        128,
        256,
        256,
        256,
        512,
    ]


@pytest.mark.parametrize("head_dim", [96, 192, 256])
def test_head_dims_the_kernels_mask_load(head_dim):
    assert parse_spec(edited("kimi-k3", "kda.head_dim", head_dim), "spec.yaml").kda.head_dim == head_dim


@pytest.mark.parametrize(
    ("name", "path", "value", "line"),
    [
        ("kimi-k3", "kda.head_dim", 320, "spec.yaml: kda.head_dim: 320 needs 512-wide tiles"),
        ("kimi-linear-48b-a3b", "kda.head_dim", 257, "spec.yaml: kda.head_dim: 257 needs 512-wide tiles"),
        ("kimi-k3", "mla.kv_lora_rank", 2049, "spec.yaml: mla.kv_lora_rank: 2049 (with qk_rope_head_dim 64) needs"),
        ("kimi-k3", "quantization.group_size", 16, "spec.yaml: quantization.group_size: 16;"),
    ],
)
def test_what_no_kernel_can_serve_is_refused_at_load(name, path, value, line):
    with pytest.raises(InputError) as err:
        parse_spec(edited(name, path, value), "spec.yaml")
    assert str(err.value).startswith(line) and "\n" not in str(err.value)


def test_the_mla_shared_memory_model_meets_the_measured_points():
    # (latent, rope) -> shared bytes of mla_decode on sm_90, from `integrate compile` (docs/kernels.md); the largest
    # spec the model accepts, latent 2048 with rope 512, compiled at 224 KiB, inside the 227 KiB limit.
    measured = {(512, 64): 67584, (1024, 64): 116736, (2048, 64): 215040, (512, 256): 73728, (2048, 512): 229376}
    for (lat, rope), shared in measured.items():
        model = kernel_limits.MLA_BYTES_PER_LATENT * lat + kernel_limits.MLA_BYTES_PER_ROPE * rope
        assert model + kernel_limits.MLA_BYTES_FIXED == shared
    assert parse_spec(edited("kimi-k3", "mla.qk_rope_head_dim", 512), "x").mla.qk_rope_head_dim == 512


def test_compile_refuses_an_impossible_head_dim_in_one_line_and_builds_nothing(tmp_path):
    spec = tmp_path / "wide.yaml"
    spec.write_text(yaml.safe_dump(edited("kimi-linear-48b-a3b", "kda.head_dim", 320)))
    result = integrate("compile", spec, "--arch", "sm_90", "-o", tmp_path / "out")
    assert_bad_input(result, str(spec), "kda.head_dim: 320")
    assert not (tmp_path / "out").exists()


def test_compile_head_dim_96_for_sm_90_and_sm_100(tmp_path):
    """Issue 15's failure: Kimi Linear at KDA head dim 96 through `integrate compile`, both archs, every KDA kernel
    a real one (it stores its outputs: aot refuses a kernel the compiler reduced to a trap) within the budgets."""
    spec = tmp_path / "hd96.yaml"
    spec.write_text(yaml.safe_dump(edited("kimi-linear-48b-a3b", "kda.head_dim", 96)))
    result = integrate("compile", spec, "--arch", "sm_90", "--arch", "sm_100", "-o", tmp_path / "out", "--json")
    assert result.code == 0, result.err
    rows = json.loads(result.out)["kernels"]
    kda = [row for row in rows if row["kernel"].startswith(("kda.", "gated_rmsnorm"))]
    assert {(row["kernel"], row["arch"]) for row in kda} == {
        (kernel, arch)
        for kernel in ("kda.chunk_prepare.plain", "kda.chunk_output", "kda.chunk_output.h0", "kda.decode.plain")
        + ("kda.decode.plain.verify", "gated_rmsnorm")
        for arch in ("sm_90", "sm_100")
    }
    for row in kda:
        assert "K=96" in row["config"] or "V=96" in row["config"], row
        assert "BK=128" in row["config"] or row["kernel"] == "gated_rmsnorm", row
        assert 0 < row["registers"] <= 255 and row["shared_bytes"] <= 227 * 1024, row
        assert (tmp_path / "out" / "cubin" / row["cubin"]).read_bytes()[:4] == b"\x7fELF"
