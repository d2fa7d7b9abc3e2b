#!/usr/bin/env python3
"""scripts/skip_guard.py on synthetic ctest JUnit files (as CMake 3.25 writes them: a skipped
GoogleTest case is status="notrun" with <skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/> and the
`[  SKIPPED ]` block in system-out) and a fake machine (the probes replaced): an allowed skip passes,
a skip whose need the machine satisfies fails, an untagged or unknown-tagged skip fails,
FERRY_ALLOW_SKIPS allows a tag, a test whose fixture failed fails; and the real probes on fake
inputs (cpuinfo, the SmolLM2 file, `ferry version`, the venv python).
"""
import contextlib
import importlib.util
import io
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest
from unittest import mock
from xml.sax.saxutils import escape

sys.dont_write_bytecode = True  # no scripts/__pycache__ in the checkout
GUARD = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "skip_guard.py"
spec = importlib.util.spec_from_file_location("skip_guard", GUARD)
guard = importlib.util.module_from_spec(spec)
spec.loader.exec_module(guard)


def passed(name):
    return f'<testcase name="{name}" classname="{name}" time="0.1" status="run"><system-out>ok</system-out></testcase>'


def skipped(name, message):
    suite, test = name.split(".", 1)[1].split(".", 1)
    out = (f"Running main() from gmock_main.cc\nNote: Google Test filter = {suite}.{test}\n"
           f"[ RUN      ] {suite}.{test}\n/work/main/tests/unit/x_test.cpp:57: Skipped\n{message}\n\n"
           f"[  SKIPPED ] {suite}.{test} (0 ms)\n[==========] 1 test from 1 test suite ran. (0 ms total)\n"
           f"[  PASSED  ] 0 tests.\n[  SKIPPED ] 1 test, listed below:\n[  SKIPPED ] {suite}.{test}\n")
    return (f'<testcase name="{name}" classname="{name}" time="0.01" status="notrun">'
            f'<skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/><system-out>{escape(out)}</system-out></testcase>')


def fixture_failed(name, fixture):
    return (f'<testcase name="{name}" classname="{name}" time="0" status="notrun">'
            f'<skipped message="Fixture dependency failed"/>'
            f'<system-out>Failed test dependencies: {fixture}</system-out></testcase>')


class Guard(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.probed = []
        # The fake machine: no GPU, bitsandbytes installed, anything else a probe that must not run.
        fake = {"gpu": (False, "fake: no GPU"), "bitsandbytes": (True, "fake: bitsandbytes 0.50.2")}
        for tag, need in guard.NEEDS.items():
            def probe(machine, tag=tag):
                self.probed.append(tag)
                if tag not in fake:
                    raise AssertionError(f"probed {tag}, which no test skipped for")
                return fake[tag]
            patcher = mock.patch.object(need, "probe", probe)
            patcher.start()
            self.addCleanup(patcher.stop)
        env = mock.patch.dict(os.environ)
        env.start()
        self.addCleanup(env.stop)
        os.environ.pop(guard.ALLOW_ENV, None)

    def check(self, *cases):
        """(exit code, printed summary) of the guard on a JUnit file holding CASES."""
        path = pathlib.Path(self.dir.name) / "junit.xml"
        path.write_text('<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="(empty)" tests="%d">\n%s\n'
                        '</testsuite>' % (len(cases), "\n".join(cases)))
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            rc = guard.main([str(path), "--build", self.dir.name])
        return rc, out.getvalue()

    def test_no_skips_pass_and_probe_nothing(self):
        rc, out = self.check(passed("a_test.A.one"), passed("a_test.A.two"))
        self.assertEqual(rc, 0, out)
        self.assertIn("0 of 2 tests skipped", out)
        self.assertEqual(self.probed, [])

    def test_a_skip_this_machine_cannot_run_is_allowed(self):  # (a)
        rc, out = self.check(passed("p.A.one"), skipped("ops_gpu_test.Gpu.Rmsnorm", "[needs gpu] no GPU visible"),
                             skipped("ops_gpu_test.Gpu.Head", "[needs gpu] no GPU visible"))
        self.assertEqual(rc, 0, out)
        self.assertIn("[needs gpu] 2 skipped: allowed, this machine lacks a usable CUDA device", out)
        self.assertIn("found: fake: no GPU", out)
        self.assertIn("- ops_gpu_test.Gpu.Rmsnorm", out)
        self.assertEqual(self.probed, ["gpu"])  # once per tag

    def test_a_skip_whose_need_is_satisfied_fails(self):  # (b)
        rc, out = self.check(skipped("kernels_int8_parity_test.Int8Parity.Q",
                                     "[needs bitsandbytes] bitsandbytes cannot be imported: No module named x"),
                             skipped("ops_gpu_test.Gpu.Rmsnorm", "[needs gpu] no GPU visible"))
        self.assertEqual(rc, 1, out)
        self.assertIn("[needs bitsandbytes] 1 skipped: FAIL, this machine has bitsandbytes in the deps venv", out)
        self.assertIn("allow it with FERRY_ALLOW_SKIPS=bitsandbytes", out)
        self.assertIn("[needs gpu] 1 skipped: allowed", out)
        self.assertIn("skip guard: FAILED", out)

    def test_an_untagged_skip_fails(self):  # (c)
        rc, out = self.check(skipped("metrics_crc32c_test.Crc32c.Hw", "no SSE4.2 on this CPU"))
        self.assertEqual(rc, 1, out)
        self.assertIn("untagged 1 skipped: FAIL", out)
        self.assertIn("- metrics_crc32c_test.Crc32c.Hw: no SSE4.2 on this CPU", out)

    def test_a_tag_not_at_the_start_of_the_message_is_no_tag(self):
        rc, out = self.check(skipped("a_test.A.b", "skipped, as [needs gpu] would say"))
        self.assertEqual(rc, 1, out)
        self.assertIn("untagged 1 skipped", out)

    def test_an_unknown_tag_fails(self):
        rc, out = self.check(skipped("a_test.A.b", "[needs quantum] no qubits"))
        self.assertEqual(rc, 1, out)
        self.assertIn("[needs quantum] 1 skipped: FAIL, unknown tag", out)

    def test_ferry_allow_skips_allows_a_satisfied_need(self):  # (d)
        os.environ[guard.ALLOW_ENV] = "gpu, bitsandbytes"
        rc, out = self.check(skipped("kernels_int8_parity_test.Int8Parity.Q", "[needs bitsandbytes] cannot import"))
        self.assertEqual(rc, 0, out)
        self.assertIn("FERRY_ALLOW_SKIPS=gpu,bitsandbytes", out.splitlines()[0])
        self.assertIn("[needs bitsandbytes] 1 skipped: allowed by FERRY_ALLOW_SKIPS=bitsandbytes, although", out)

    def test_ferry_allow_skips_does_not_allow_untagged_skips_or_unknown_tags(self):
        os.environ[guard.ALLOW_ENV] = "gpu"
        rc, out = self.check(skipped("a_test.A.b", "no GPU visible"))
        self.assertEqual(rc, 1, out)
        os.environ[guard.ALLOW_ENV] = "gpus"
        rc, out = self.check(skipped("a_test.A.b", "[needs gpu] no GPU visible"))
        self.assertEqual(rc, 2, out)
        self.assertIn("unknown tags gpus", out)

    def test_a_test_whose_fixture_failed_fails(self):
        rc, out = self.check(passed("parity_fixture_bnb_folder"),
                             fixture_failed("kernels_int8_parity_test.Int8Parity.Q", "parity_fixture_kernels_int8"))
        self.assertEqual(rc, 1, out)
        self.assertIn("- kernels_int8_parity_test.Int8Parity.Q: Fixture dependency failed", out)

    def test_a_file_that_is_not_junit_xml_is_an_error(self):
        path = pathlib.Path(self.dir.name) / "junit.xml"
        path.write_text("<testsuite>")
        with contextlib.redirect_stderr(io.StringIO()):
            self.assertEqual(guard.main([str(path)]), 2)
            self.assertEqual(guard.main([str(path) + ".missing"]), 2)


class Probes(unittest.TestCase):
    """The real probes, on fake inputs."""

    def setUp(self):
        self.dir = pathlib.Path(tempfile.mkdtemp())
        self.addCleanup(subprocess.run, ["rm", "-rf", str(self.dir)])
        self.machine = guard.Machine(build=self.dir, python=sys.executable, deps=self.dir / "deps",
                                     cpuinfo=self.dir / "cpuinfo")

    def test_sse42_reads_the_cpu_flags(self):
        self.machine.cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse4_1 avx\n")
        self.assertFalse(guard.sse42(self.machine)[0])
        self.machine.cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse4_1 sse4_2 avx\n")
        self.assertTrue(guard.sse42(self.machine)[0])

    def test_smollm2_looks_for_the_fetched_file(self):
        self.assertFalse(guard.smollm2(self.machine)[0])
        gguf = self.machine.deps / "models" / "smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
        gguf.parent.mkdir(parents=True)
        gguf.write_bytes(b"")
        self.assertFalse(guard.smollm2(self.machine)[0])  # fetch-smollm2.sh's test: -s, not empty
        gguf.write_bytes(b"GGUF")
        self.assertTrue(guard.smollm2(self.machine)[0])

    def test_gloo_asks_ferry_version_without_headers(self):
        self.machine.include_dirs = [str(self.dir / "include")]
        self.assertFalse(guard.gloo(self.machine)[0])  # no headers, no ferry
        ferry = self.dir / "ferry"
        ferry.write_text("#!/bin/sh\necho 'data parallelism: not compiled (no Gloo headers at build time)'\n")
        ferry.chmod(0o755)
        satisfied, evidence = guard.gloo(self.machine)
        self.assertFalse(satisfied, evidence)
        self.assertIn("data parallelism: not compiled", evidence)
        ferry.write_text("#!/bin/sh\necho 'data parallelism: c10d Gloo (ferry launch, torchrun)'\n")
        self.assertTrue(guard.gloo(self.machine)[0])

    def test_gloo_headers_alone_satisfy_it(self):  # the build should then have Gloo: re-run cmake
        (self.dir / "include" / "gloo").mkdir(parents=True)
        (self.dir / "include" / "gloo" / "algorithm.h").write_text("")
        self.machine.include_dirs = [str(self.dir / "include")]
        self.assertTrue(guard.gloo(self.machine)[0])

    def test_venv_probes_run_the_venv_python(self):
        self.assertTrue(guard.venv_runs("print('yes')")(self.machine)[0])
        self.assertFalse(guard.venv_runs("import no_such_module_here")(self.machine)[0])
        missing = guard.Machine(build=self.dir, python=str(self.dir / "no-python"))
        self.assertFalse(guard.venv_runs("print('yes')")(missing)[0])


class CommandLine(unittest.TestCase):
    def test_exit_codes(self):
        with tempfile.TemporaryDirectory() as d:
            path = pathlib.Path(d) / "junit.xml"
            env = {k: v for k, v in os.environ.items() if k != guard.ALLOW_ENV}
            path.write_text(f'<testsuite tests="1">{passed("a_test.A.b")}</testsuite>')
            run = subprocess.run([sys.executable, str(GUARD), str(path)], capture_output=True, text=True, env=env)
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            path.write_text(f'<testsuite tests="1">{skipped("a_test.A.b", "no reason")}</testsuite>')
            run = subprocess.run([sys.executable, str(GUARD), str(path)], capture_output=True, text=True, env=env)
            self.assertEqual(run.returncode, 1, run.stdout + run.stderr)
            self.assertIn("untagged", run.stdout)


if __name__ == "__main__":
    unittest.main()
