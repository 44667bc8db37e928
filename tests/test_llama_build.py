"""Bad input to the llama.cpp family gets one-line named errors, without llama.cpp installed (the
default run): a missing toolchain, a failing build, a lock without the binding, an example that
was not built, an unknown path, a sampler setting out of its domain, a GGUF that is not one."""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

import pytest

from dsi_ref.backends.llama_cpp import build, cpp
from dsi_ref.backends.llama_cpp.binding import BindingPath, llama_seed
from dsi_ref.backends.llama_cpp.sampling import SamplerConfig
from dsi_ref.base.errors import (
    EngineBuildError,
    EngineEnvironmentError,
    EngineOptionError,
    InvalidParameterError,
    ModelFileError,
    ToolchainMissingError,
)

ROOT = Path(__file__).resolve().parent.parent


def test_a_missing_toolchain_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("CXX", raising=False)
    with pytest.raises(ToolchainMissingError, match="needs a cmake") as error:
        build.check_toolchain()
    assert "\n" not in str(error.value)


def _toolchain() -> None:
    try:
        build.check_toolchain()
    except ToolchainMissingError as error:
        pytest.skip(str(error))


def test_a_source_without_llama_cpp_fails_in_one_line(tmp_path: Path) -> None:
    _toolchain()
    with pytest.raises(EngineBuildError, match=r"no llama\.cpp sources") as error:
        build.build_examples(tmp_path, tmp_path / "out")
    assert "\n" not in str(error.value)


def test_a_file_that_is_not_an_archive_fails_in_one_line(tmp_path: Path) -> None:
    _toolchain()
    junk = tmp_path / "llama_cpp_python-0.0.0.tar.gz"
    junk.write_bytes(b"not a tarball")
    with pytest.raises(EngineBuildError, match="not a readable source archive"):
        build.build_examples(junk, tmp_path / "out")


def test_a_failing_cmake_step_names_its_log(tmp_path: Path) -> None:
    _toolchain()
    source = tmp_path / "pkg" / "vendor" / "llama.cpp"
    source.mkdir(parents=True)
    (source / "CMakeLists.txt").write_text("this is not cmake(\n")
    archive = tmp_path / "llama_cpp_python-0.0.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "pkg", arcname="pkg")
    with pytest.raises(EngineBuildError, match=r"configuring llama.cpp \(cmake\) failed") as error:
        build.build_examples(archive, tmp_path / "out")
    assert "full log:" in str(error.value) and "\n" not in str(error.value)


def test_the_lock_pins_the_binding_with_hashes(tmp_path: Path) -> None:
    line = build.pinned_requirement(ROOT / "locks" / "py311-llama.txt")
    assert line.startswith("llama-cpp-python==") and "--hash=sha256:" in line
    other = tmp_path / "lock.txt"
    other.write_text((ROOT / "locks" / "py311-test.txt").read_text())
    with pytest.raises(EngineBuildError, match="pins no llama-cpp-python"):
        build.pinned_requirement(other)


def test_the_build_command_reports_errors_in_one_line(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    assert build.main(["--source", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dsi-ref: error: building llama.cpp needs") and "\n" not in err


def test_an_example_that_was_not_built_says_how_to_build_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSI_REF_LLAMA_BIN", str(tmp_path))
    monkeypatch.setenv("PATH", "")
    with pytest.raises(EngineEnvironmentError, match=r"run\.py audit --llama"):
        cpp.binary("llama-speculative")
    with pytest.raises(EngineEnvironmentError):
        cpp.cpp_sampler(tmp_path / "t.gguf", cpp.CppPath("no-draft"), b"ab", 2,
                        SamplerConfig("plain"))


def test_the_built_examples_are_found_in_the_bin_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = tmp_path / "llama-speculative"
    shutil.copy2(shutil.which("true") or "/bin/true", exe)
    monkeypatch.setenv("DSI_REF_LLAMA_BIN", str(tmp_path))
    assert cpp.binary("llama-speculative") == exe


@pytest.mark.parametrize(("make", "match"), [
    (lambda: cpp.CppPath("beam"), r"unknown C\+\+ path"),
    (lambda: cpp.CppPath("no-draft", 2), "0 exactly for no-draft"),
    (lambda: cpp.CppPath("speculative", 2), "a drafter file goes with"),
    (lambda: cpp.CppPath("ngram-simple", 2, Path("d.gguf")), "a drafter file goes with"),
    (lambda: BindingPath("tree"), "unknown binding path"),
    (lambda: BindingPath("plain", 2), "0 exactly for the plain path"),
    (lambda: BindingPath("draft-model", 2), "a drafter file goes with"),
])
def test_unknown_paths_and_options_are_refused(make: object, match: str) -> None:
    with pytest.raises(EngineOptionError, match=match):
        make()  # type: ignore[operator]


@pytest.mark.parametrize("bad", [{"temperature": 0.0}, {"top_p": 0.0}, {"min_p": 1.0},
                                 {"typical_p": 1.5}, {"repeat_penalty": 0.0},
                                 {"penalty_last_n": -1}])
def test_sampler_settings_out_of_their_domain(bad: dict[str, float]) -> None:
    with pytest.raises(InvalidParameterError, match="need"):
        SamplerConfig("bad", **bad)  # type: ignore[arg-type]


def test_seeds_fit_llama_cpp_and_avoid_its_random_seed() -> None:
    assert llama_seed(0xFFFFFFFF) == 0 and llama_seed(2**64 - 1) < 0xFFFFFFFF
    assert llama_seed(12345) == 12345


def test_a_file_that_is_not_a_gguf_is_named(tmp_path: Path) -> None:
    pytest.importorskip("gguf")
    from dsi_ref.backends.llama_cpp.models import read_vocabulary

    junk = tmp_path / "model.gguf"
    junk.write_bytes(b"GGUF but not really")
    with pytest.raises(ModelFileError, match="not a readable GGUF"):
        read_vocabulary(junk)
    with pytest.raises(ModelFileError, match="no model file"):
        read_vocabulary(tmp_path / "missing.gguf")


def test_the_flush_at_exit_is_added_before_the_last_return(tmp_path: Path) -> None:
    body = ("int main() {\n    if (x) {\n        return 0;\n    }\n    LOG(\"\\n\");\n\n"
            "    return 0;\n}\n")
    for name in build.SOURCES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body)
    log = tmp_path / "build.log"
    assert build.add_flush_at_exit(tmp_path, log) == list(build.SOURCES)
    text = (tmp_path / build.SOURCES[0]).read_text()
    assert text.startswith("#include <cstdlib>\n")
    lines = text.splitlines()
    flush = next(i for i, line in enumerate(lines) if build.FLUSH_VARIABLE in line)
    assert lines[flush + 1] == "    return 0;" and lines[flush + 2] == "}"
    assert "        return 0;" in lines[:flush]                  # the early return untouched
    assert build.add_flush_at_exit(tmp_path, log) == []          # once only
    (tmp_path / build.SOURCES[1]).write_text("int main() { return 1; }\n")
    (tmp_path / build.SOURCES[0]).unlink()
    assert build.add_flush_at_exit(tmp_path, log) == []
    assert log.read_text().count("flush at exit not added") == 4
