"""The pytest plugin (what users get in their own suites) and the ``dsi-ref`` command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dsi_ref import cli

pytest_plugins = ["pytester"]

USER_TESTS = '''
from fractions import Fraction as F
import dsi_ref as dr
from hypothesis import given

def my_si(target, drafter, n, rng):
    return dr.speculative(target, drafter, (), n, rng, lookahead=2).tokens

def test_my_decoder_is_lossless(assert_lossless, default_suite):
    for pair in default_suite[:3]:
        assert_lossless(lambda rng: dr.speculative(pair.target, pair.drafter, pair.prompt, 3,
                                                   rng, 2).tokens,
                        target=pair.target, prompt=pair.prompt, max_new_tokens=3)

def test_strategies_fixture(dsi_strategies):
    @given(dsi_strategies.model_pairs())
    def inner(pair):
        target, drafter = pair
        assert target.vocab_size == drafter.vocab_size
    inner()

def test_wrong_decoder_fails(assert_lossless):
    t = dr.TableLM.context_free((F(1, 2), F(1, 2)))
    assert_lossless(lambda rng: (rng.categorical([F(3, 4), F(1, 4)]),), target=t,
                    max_new_tokens=1)
'''


def test_plugin_fixtures_work_in_a_user_suite_and_report_the_worst_sequence(
        pytester: pytest.Pytester) -> None:
    # In process: the inner run still finds the plugin through its ``pytest11`` entry point (with
    # ``-p no:dsi_ref`` every user test errors), without a second interpreter importing dsi_ref
    # (~3 s); test_console_script_is_installed below runs a real subprocess.
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*LOSSY: total-variation distance 1/4*",
                                 "*worst sequence (1,): decoder P = 1/4*target P = 1/2*"])


def test_cli_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    assert "audit" in capsys.readouterr().out


def test_audit_quick_decoders_section_passes_and_writes_json(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    out = tmp_path / "audit.json"
    code = cli.main(["audit", "--quick", "--section", "decoders", "--no-progress",
                     "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "lossless" in text and "LOSSY" not in text
    assert "PASS: 1/1 sections passed" in text
    assert '"name": "decoders"' in out.read_text()


def test_audit_rejects_an_unknown_section(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["audit", "--section", "nope"]) == 2
    assert "unknown section(s): nope" in capsys.readouterr().err


def test_console_script_is_installed() -> None:
    exe = Path(sys.executable).with_name("dsi-ref")
    result = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True)
    assert result.stdout.startswith("dsi-ref ")
