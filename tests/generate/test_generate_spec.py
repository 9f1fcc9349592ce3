"""The spec of ``tritune generate`` (``generate/spec.py``) and the odd shapes derived from it
(``generate/derive.py``): every problem with a spec is one line naming the file and the problem;
derived cases keep broadcasting consistent and are skipped where the reference fails."""

from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")

from tritune.errors import one_line  # noqa: E402
from tritune.generate.derive import derived_cases, odd_size, resized  # noqa: E402
from tritune.generate.spec import SpecError, load_spec, shapes_text, short_dtype  # noqa: E402
from tritune.verify.tolerances import TABLE  # noqa: E402

BIAS_RELU = """
import torch

def reference(x, bias):
    return torch.relu(x + bias)

def inputs(device):
    return [(torch.randn(4, 64, device=device), torch.randn(64, device=device))]
"""


def write(tmp_path, text: str, name: str = "spec.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def spec_text(reference: str = "return torch.relu(x + bias)",
              inputs: str = "return [(torch.randn(4, 8), torch.randn(8))]", extra: str = "") -> str:
    return (f"import torch\n\ndef reference(x, bias):\n    {reference}\n\n"
            f"def inputs(device):\n    {inputs}\n{extra}\n")


# ------------------------------------------------------------------------------------- loading

def test_a_spec_loads_with_its_name_text_cases_and_tolerance(tmp_path):
    extra = "name = 'bias_relu'\ntolerance = {torch.float16: (1e-2, 0), 'float32': [2e-4, 3e-5]}\n"
    path = write(tmp_path, spec_text(extra=extra))
    spec = load_spec(path)
    assert spec.path == path.resolve() and spec.path.is_absolute()
    assert spec.name == "bias_relu" and "def reference(x, bias)" in spec.text
    assert spec.tolerance == {"float16": (0.01, 0.0), "float32": (2e-4, 3e-5)}
    assert (spec.tolerance_for("float32").rtol, spec.tolerance_for("float32").atol) == (2e-4, 3e-5)
    assert spec.tolerance_for("bfloat16") == TABLE["bfloat16"]  # not overridden: the table's
    [case] = spec.cases("cpu")
    assert case.label == "spec 0" and not case.derived and shapes_text(case.tensors) == "f32[4,8], f32[8]"
    [out] = spec.outputs(case)
    torch.testing.assert_close(out, torch.relu(case.tensors[0] + case.tensors[1]))


def test_the_name_defaults_to_the_stem_and_check_false_does_not_run_the_reference(tmp_path):
    path = write(tmp_path, spec_text(reference="raise RuntimeError('broken')"), "rms_norm.py")
    spec = load_spec(path, check=False)
    assert spec.name == "rms_norm" and spec.tolerance is None
    with pytest.raises(SpecError, match="reference fails"):
        load_spec(path)


def test_the_reference_gets_copies_so_an_in_place_reference_leaves_the_case_alone(tmp_path):
    spec = load_spec(write(tmp_path, spec_text(reference="return x.add_(bias).relu_()")))
    [case] = spec.cases("cpu")
    before = case.tensors[0].clone()
    spec.outputs(case)
    assert torch.equal(case.tensors[0], before)


def test_shapes_text():
    args = (torch.zeros(8, 256, 1024, dtype=torch.float16), torch.zeros(1024, dtype=torch.float16))
    assert shapes_text(args) == "f16[8,256,1024], f16[1024]"
    more = (torch.zeros(2, dtype=torch.bfloat16), torch.zeros(3, dtype=torch.int64), torch.zeros(1, dtype=torch.bool),
            torch.tensor(1.0), 1e-6, True)
    assert shapes_text(more) == "bf16[2], i64[3], bool[1], f32[], 1e-06, True"
    assert short_dtype(torch.uint8) == "u8" and short_dtype(torch.float64) == "f64"


ERRORS = {
    "syntax": ("def reference(x)\n    return x\n", "does not import: SyntaxError: "),
    "raises": ("raise ValueError('no spec here\\nsecond line')\n", "does not import: ValueError: no spec here"),
    "exits": ("import sys\nsys.exit(3)\n", "does not import: calls sys.exit(3) on import"),
    "no reference": ("def inputs(device):\n    return []\n", "defines no reference(*tensors) function"),
    "no inputs": ("def reference(x):\n    return x\n", "defines no inputs(device) function"),
    "inputs fails": (spec_text(inputs="raise RuntimeError('no GPU\\nat all')"),
                     "inputs('cpu') fails: RuntimeError: no GPU"),
    "empty": (spec_text(inputs="return []"), "inputs('cpu') returns an empty list, not a non-empty list of tuples"),
    "a tensor": (spec_text(inputs="return torch.zeros(3)"), "inputs('cpu') returns a Tensor, not a non-empty"),
    "not tuples": (spec_text(inputs="return [torch.zeros(3)]"), "inputs('cpu')[0] is a Tensor, not a tuple"),
    "no tensor": (spec_text(inputs="return [(1, 2.0)]"), "inputs('cpu')[0] holds no tensor"),
    "a string": (spec_text(inputs="return [(torch.zeros(3), 'x')]"),
                 "inputs('cpu')[0][1] is a str: arguments are tensors and scalars"),
    "fails on case 1": (spec_text(inputs="return [(torch.zeros(4, 8), torch.zeros(8)), (torch.zeros(4, 8), "
                                         "torch.zeros(5))]"),
                        "reference fails on case 'spec 1' (f32[4,8], f32[5]): RuntimeError: The size of tensor a (8)"),
    # SystemExit is no Exception: uncaught, the CLI ended with the code and no word
    "reference exits": (spec_text(reference="raise SystemExit(3)"),
                        "reference fails on case 'spec 0' (f32[4,8], f32[8]): SystemExit: 3"),
    "inputs exits": (spec_text(inputs="raise SystemExit('bye')"), "inputs('cpu') fails: SystemExit: bye"),
    "returns a float": (spec_text(reference="return 1.5"),
                        "reference returns a float on case 'spec 0' (f32[4,8], f32[8]), not a tensor or a tuple"),
    "returns a dict": (spec_text(reference="return {'y': x}"), "reference returns a dict of 1 on case 'spec 0'"),
    "name": (spec_text(extra="name = 5"), "`name` must be a non-empty string, not an int"),
    "tolerance type": (spec_text(extra="tolerance = 0.1"), "`tolerance` must be a dict {dtype name: (rtol, atol)}"),
    "tolerance dtype": (spec_text(extra="tolerance = {'float17': (1e-3, 1e-3)}"),
                        "`tolerance` names dtype 'float17': expected one of float64, float32"),
    "tolerance negative": (spec_text(extra="tolerance = {'float16': (1e-3, -1)}"),
                           "`tolerance['float16']` must be (rtol, atol), two finite numbers >= 0, not (0.001, -1)"),
    "tolerance triple": (spec_text(extra="tolerance = {'float16': (1e-3, 1e-3, 0)}"), "must be (rtol, atol)"),
    "tolerance nan": (spec_text(extra="tolerance = {'float16': (float('nan'), 0)}"), "must be (rtol, atol)"),
}


@pytest.mark.parametrize("problem", list(ERRORS))
def test_each_spec_problem_is_one_line_naming_the_file(tmp_path, problem):
    text, expected = ERRORS[problem]
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path.resolve()}: ")
    assert expected in message, message
    assert one_line(caught.value) == message  # an InputError: the CLI prints it as it is, no type, no traceback


def test_a_missing_file_and_a_tensor_on_another_device(tmp_path):
    with pytest.raises(SpecError, match=r"nope\.py: no such file$"):
        load_spec(tmp_path / "nope.py")
    path = write(tmp_path, spec_text())  # ignores its device: makes CPU tensors when asked for meta
    with pytest.raises(SpecError, match=r"inputs\('meta'\)\[0\]\[0\] is on cpu, not on 'meta'"):
        load_spec(path, device="meta")


# ------------------------------------------------------------------------------------ derived

def shapes(case) -> list[tuple]:
    return [tuple(t.shape) for t in case.tensors if isinstance(t, torch.Tensor)]


def test_derived_cases_of_a_bias_spec(tmp_path):
    spec = load_spec(write(tmp_path, BIAS_RELU))
    cases = derived_cases(spec, "cpu")
    assert [c.label for c in cases] == ["odd", "one row", "larger"]
    assert [shapes(c) for c in cases] == [[(3, 63), (63,)], [(1, 64), (64,)], [(8, 64), (64,)]]
    assert all(c.derived and all(t.dtype == torch.float32 for t in c.tensors) for c in cases)


def test_broadcasting_stays_consistent_in_three_dimensions(tmp_path):
    # x (2, 4, 40), a (4, 1) scale broadcast along its last dim, and an fp16 bias of its last dim
    text = """
    import torch

    def reference(x, scale, bias):
        return x * scale + bias.float()

    def inputs(device):
        return [(torch.randn(2, 4, 40), torch.randn(4, 1), torch.randn(40).half())]
    """
    spec = load_spec(write(tmp_path, text))
    cases = derived_cases(spec, "cpu")
    assert {c.label: shapes(c) for c in cases} == {
        "odd": [(4, 3, 39), (3, 1), (39,)],  # 2 -> 4, 4 -> 3, 40 -> 39; the broadcast 1 stays
        "one row": [(1, 1, 40), (1, 1), (40,)],
        "larger": [(4, 4, 40), (4, 1), (40,)],
    }
    assert all(c.tensors[2].dtype == torch.float16 for c in cases)
    for case in cases:
        spec.outputs(case)  # the reference accepts every derived case


def test_a_derivation_the_reference_rejects_is_skipped(tmp_path):
    needs_16 = "assert x.shape[-1] % 16 == 0, 'rows of a multiple of 16 only'\n    return torch.relu(x + bias)"
    spec = load_spec(write(tmp_path, spec_text(reference=needs_16, inputs="return [(torch.randn(4, 64), "
                                                                          "torch.randn(64))]")))
    assert [c.label for c in derived_cases(spec, "cpu")] == ["one row", "larger"]
    many_rows = "assert x.shape[0] > 1\n    return torch.relu(x + bias)"
    spec = load_spec(write(tmp_path, spec_text(reference=many_rows)))
    assert [c.label for c in derived_cases(spec, "cpu")] == ["odd", "larger"]


def test_a_derivation_equal_to_an_existing_case_is_skipped(tmp_path):
    rank_one = spec_text(reference="return x * bias", inputs="return [(torch.randn(64), torch.randn(64))]")
    cases = derived_cases(load_spec(write(tmp_path, rank_one)), "cpu")
    assert [(c.label, shapes(c)) for c in cases] == [("odd", [(63,), (63,)]), ("larger", [(128,), (128,)])]
    two = spec_text(inputs="return [(torch.randn(4, 64), torch.randn(64)), (torch.randn(8, 64), torch.randn(64))]")
    cases = derived_cases(load_spec(write(tmp_path, two, "two.py")), "cpu")
    assert [c.label for c in cases] == ["odd", "one row"]  # "larger" is (8, 64): the spec's case 1


def test_fresh_inputs_are_seeded_and_keep_dtype_range_and_sign(tmp_path):
    text = spec_text(reference="return x.sqrt() + bias[idx].float() + flag", inputs="return [(torch.rand(4, 8) + 1, "
                     "torch.randn(10), torch.randint(3, 7, (4, 8)), torch.ones(4, 8, dtype=torch.bool), 0.5)]")
    text = text.replace("(x, bias)", "(x, bias, idx, flag, eps)")
    spec = load_spec(write(tmp_path, text))
    first, again, other = (derived_cases(spec, "cpu", seed=s) for s in (0, 0, 1))
    for a, b in zip(first, again):
        assert all(torch.equal(x, y) for x, y in zip(a.tensors[:4], b.tensors[:4]))
    assert not torch.equal(first[0].tensors[0], other[0].tensors[0])
    for case in first:
        x, bias, idx, flag, eps = case.tensors
        assert bool((x >= 0).all()) and bool((bias < 0).any())  # x was non-negative, bias was not
        assert idx.dtype == torch.int64 and 3 <= int(idx.min()) and int(idx.max()) <= 6
        assert flag.dtype == torch.bool and eps == 0.5
        assert bias.shape == (10,)  # no dim of bias matches the frame's: it stays


def test_odd_sizes_are_never_multiples_of_16_and_resize_follows_the_frame():
    assert all(odd_size(n) % 16 and odd_size(n) != n for n in range(1, 4097))
    assert [odd_size(n) for n in (1, 2, 3, 8, 1024)] == [3, 4, 5, 7, 1023]
    assert resized((1, 64), (4, 64), (3, 63)) == (1, 63)
    assert resized((64,), (4, 64), (1, 64)) == (64,)
