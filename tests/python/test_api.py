"""import pipette: the documents and errors of the pipette command, in process.

Run by tests/python/run.sh (make check) with the interpreter the binding
was built for; PIPETTE_BIN is the pipette command of the same build, the
oracle every answer is compared with.
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import unittest
import warnings

import pipette
from pipette import _pipette

BIN = os.environ["PIPETTE_BIN"]
SRCDIR = os.environ["PIPETTE_SRCDIR"]
EXAMPLE_16 = os.path.join(SRCDIR, "etc", "examples", "hetero-16x8-h100.json")


def cli(*args):
    """(exit status, stdout, stderr) of the pipette command."""
    r = subprocess.run([BIN] + list(args), capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def cli_json(*args):
    code, out, err = cli(*args, "--format", "json")
    return code, (json.loads(out) if out.strip() else None), err


class Documents(unittest.TestCase):
    """The same JSON documents as `pipette CMD --format json`."""

    def test_issue_29_done_when(self):
        # python3 -c "import pipette; print(pipette.plan(model='llama3-8b',
        # nodes=2, gpu='h100', global_batch=64)['chosen'])": a lowercase
        # GPU name and a node count as an int
        p = pipette.plan(model="llama3-8b", nodes=2, gpu="h100", global_batch=64)
        self.assertEqual(p["chosen"]["config"], p["config"])
        self.assertEqual(p["chosen"], p["ranked"][0])
        self.assertEqual(p["config"]["global_batch"], 64)
        self.assertEqual(len(p["cluster"]["nodes"]), 2)
        self.assertEqual(p["gpu"], "H100-SXM-80GB")

    def test_plan_is_the_commands_document(self):
        args = dict(model="llama3-70b", nodes=16, gpu="H100", global_batch=512, seq_len=4096,
                    bandwidth=EXAMPLE_16, stack="nemo", top=3)
        p = pipette.plan(**args)
        code, doc, _ = cli_json("plan", "--model", "llama3-70b", "--nodes", "16", "--gpu", "H100",
                                "--global-batch", "512", "--seq-len", "4096", "--bandwidth",
                                EXAMPLE_16, "--stack", "nemo", "--top", "3")
        self.assertEqual(code, 0)
        chosen = p.pop("chosen")
        self.assertEqual(p, doc)
        self.assertEqual(chosen["config"], doc["config"])
        self.assertEqual(p["cluster"]["bandwidth"], EXAMPLE_16)
        self.assertEqual(len(p["ranked"]), 3)

    def test_lists_are_the_commands_documents(self):
        for fn, cmd in ((pipette.models, "models"), (pipette.stacks, "stacks"),
                        (pipette.gpus, "gpus")):
            code, doc, _ = cli_json(cmd)
            self.assertEqual(code, 0)
            self.assertEqual(fn(), doc, cmd)
        self.assertIn("llama3-8b", [m["name"] for m in pipette.models()])
        self.assertIn("torchtitan", [s["name"] for s in pipette.stacks()])

    def test_estimate_is_the_commands_document(self):
        e = pipette.estimate(model="llama3-8b", gpu="h100", tp=2, pp=2, dp=2, micro_batch=1,
                             global_batch=16, seq_len=4096, schedule="1f1b")
        code, doc, _ = cli_json("estimate", "--model", "llama3-8b", "--gpu", "h100", "--tp", "2",
                                "--pp", "2", "--dp", "2", "--micro-batch", "1",
                                "--global-batch", "16", "--seq-len", "4096", "--schedule", "1f1b")
        self.assertEqual(code, 0)
        self.assertEqual(e, doc)
        self.assertEqual((e["config"]["tp"], e["config"]["pp"], e["config"]["dp"]), (2, 2, 2))

    def test_estimate_that_does_not_fit_is_an_answer(self):
        # Llama 3 70B unsharded on one H100: the command exits 1 with the
        # document, and the API returns it
        code, doc, _ = cli_json("estimate", "--model", "llama3-70b", "--gpu", "h100")
        self.assertEqual(code, 1)
        self.assertEqual(pipette.estimate(model="llama3-70b", gpu="h100"), doc)


class Options(unittest.TestCase):
    """Keyword options become the command's options."""

    def test_values_flags_lists_and_dicts(self):
        p = pipette.plan(model="llama3-8b", nodes="node[1-4]", gpu="h100", global_batch=128,
                         seq_len=4096, tp=2, sequence_parallel=False, distributed_optimizer=True,
                         schedule=["1f1b", "interleaved"], stack_option={"tp_overlap": "off"},
                         mem_fraction=0.9, calibration=None)
        c = p["config"]
        self.assertEqual((c["seq_len"], c["tp"]), (4096, 2))
        self.assertFalse(c["sequence_parallel"])
        self.assertTrue(c["distributed_optimizer"])
        self.assertIn(c["schedule"], ("1f1b", "interleaved"))
        self.assertEqual(p["cluster"]["nodes"], ["node1", "node2", "node3", "node4"])
        code, doc, _ = cli_json("plan", "--model", "llama3-8b", "--nodes", "node[1-4]", "--gpu",
                                "h100", "--global-batch", "128", "--seq-len", "4096", "--tp", "2",
                                "--no-sequence-parallel", "--distributed-optimizer",
                                "--schedule", "1f1b,interleaved", "--stack-option",
                                "tp_overlap=off", "--mem-fraction", "0.9")
        self.assertEqual(code, 0)
        p.pop("chosen")
        self.assertEqual(p, doc)

    def test_path_values(self):
        import pathlib
        p = pipette.plan(model="llama3-8b", nodes=16, gpu="h100", global_batch=256,
                         bandwidth=pathlib.Path(EXAMPLE_16))
        self.assertEqual(p["cluster"]["bandwidth"], EXAMPLE_16)

    def test_format_and_help_are_refused(self):
        for kw in ({"format": "table"}, {"help": True}):
            with self.assertRaises(pipette.Error) as cm:
                pipette.plan(model="llama3-8b", nodes=2, gpu="h100", global_batch=64, **kw)
            self.assertEqual(cm.exception.code, 2)
            self.assertIn(list(kw)[0], cm.exception.message)
        # and by the C entry point itself, whoever calls it
        for args in (["--format", "table"], ["--format=env"], ["--help"], ["-h"]):
            code, out, err = _pipette.call("plan", args)
            self.assertEqual((code, out), (2, ""), args)
            self.assertTrue(err.startswith("pipette: --"), err)

    def test_unknown_option_value_type(self):
        with self.assertRaises(pipette.Error) as cm:
            pipette.plan(model="llama3-8b", nodes=2, gpu="h100", global_batch=64, tp=object())
        self.assertEqual(cm.exception.code, 2)
        self.assertIn("tp: object", cm.exception.message)


class Errors(unittest.TestCase):
    """pipette.Error carries the command's exit status and message."""

    def assert_same_error(self, fn, kwargs, argv, code):
        c, out, err = cli(*argv, "--format", "json")
        self.assertEqual(c, code)
        self.assertEqual(out, "")
        with self.assertRaises(pipette.Error) as cm:
            fn(**kwargs)
        e = cm.exception
        self.assertIsInstance(e, Exception)
        self.assertEqual(e.code, code)
        self.assertEqual("pipette: " + e.message, err.rstrip("\n"))
        self.assertEqual(str(e), e.message)

    def test_unknown_gpu(self):
        self.assert_same_error(pipette.plan, dict(model="llama3-8b", nodes=2, gpu="h1000",
                                                  global_batch=64),
                               ["plan", "--model", "llama3-8b", "--nodes", "2", "--gpu", "h1000",
                                "--global-batch", "64"], 2)

    def test_missing_field(self):
        self.assert_same_error(pipette.plan, dict(model="llama3-8b", nodes=2, gpu="h100"),
                               ["plan", "--model", "llama3-8b", "--nodes", "2", "--gpu", "h100"],
                               2)

    def test_bad_value_names_the_option(self):
        self.assert_same_error(pipette.plan, dict(model="llama3-8b", nodes=2, gpu="h100",
                                                  global_batch=64, seq_len=-5),
                               ["plan", "--model", "llama3-8b", "--nodes", "2", "--gpu", "h100",
                                "--global-batch", "64", "--seq-len", "-5"], 2)

    def test_unknown_option(self):
        self.assert_same_error(pipette.plan, dict(model="llama3-8b", nodes=2, gpu="h100",
                                                  global_batch=64, tensor_parallel=2),
                               ["plan", "--model", "llama3-8b", "--nodes", "2", "--gpu", "h100",
                                "--global-batch", "64", "--tensor-parallel", "2"], 2)

    def test_missing_file(self):
        self.assert_same_error(pipette.plan, dict(model="llama3-8b", nodes=2, gpu="h100",
                                                  global_batch=64, bandwidth="/nonexistent.json"),
                               ["plan", "--model", "llama3-8b", "--nodes", "2", "--gpu", "h100",
                                "--global-batch", "64", "--bandwidth", "/nonexistent.json"], 2)

    def test_no_fit_is_code_1(self):
        self.assert_same_error(pipette.plan, dict(model="llama3-405b", nodes=1, gpu="h100",
                                                  global_batch=8),
                               ["plan", "--model", "llama3-405b", "--nodes", "1", "--gpu", "h100",
                                "--global-batch", "8"], 1)

    def test_entry_point_refuses_other_commands_and_bad_arguments(self):
        code, out, err = _pipette.call("bandwidth", ["show"])
        self.assertEqual((code, out), (2, ""))
        self.assertIn("'bandwidth': not a command of the API", err)
        with self.assertRaises(TypeError):
            _pipette.call("plan", ["--tp", 2])
        with self.assertRaises(ValueError):
            _pipette.call("plan", ["--model", "llama3-8b\0x"])


class Warnings(unittest.TestCase):
    def test_warnings_become_python_warnings(self):
        # every figure of the example cache is older than a day
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            p = pipette.plan(model="llama3-8b", nodes=16, gpu="h100", global_batch=256,
                             bandwidth=EXAMPLE_16, max_age=1)
        self.assertEqual(p["schema"], "pipette-plan/1")
        ours = [w for w in caught if issubclass(w.category, pipette.PipetteWarning)]
        self.assertEqual(len(ours), 1)
        self.assertIn("older than 1 days", str(ours[0].message))
        self.assertEqual(ours[0].filename, __file__)


class Process(unittest.TestCase):
    """The call leaves the process's standard streams as they were."""

    def test_stdio_restored_and_untouched(self):
        code = ("import ctypes, sys, pipette\n"
                "libc = ctypes.CDLL(None)\n"
                "print('before', flush=True)\n"
                "pipette.models()\n"
                "try:\n"
                "    pipette.plan(model='llama3-8b', nodes=2, gpu='nope', global_batch=64)\n"
                "except pipette.Error:\n"
                "    pass\n"
                "libc.printf(b'c stdout\\n'); libc.fflush(None)\n"
                "print('after', flush=True)\n")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=os.environ)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "before\nc stdout\nafter\n")
        self.assertEqual(r.stderr, "")

    def test_threads(self):
        # concurrent calls are serialised and each gets its own document
        results, errors = {}, []

        def run(n):
            try:
                results[n] = pipette.plan(model="llama3-8b", nodes=n, gpu="h100",
                                          global_batch=64 * n)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(n,)) for n in (1, 2, 3, 4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        for n in (1, 2, 3, 4):
            self.assertEqual(len(results[n]["cluster"]["nodes"]), n)
            self.assertEqual(results[n]["config"]["global_batch"], 64 * n)


class LoadPlan(unittest.TestCase):
    def setUp(self):
        self.doc = pipette.plan(model="llama3-8b", nodes=2, gpu="h100", global_batch=64)
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "plan.json")
        with open(self.path, "w") as f:
            json.dump(self.doc, f)

    def tearDown(self):
        self.dir.cleanup()

    def test_dict_path_and_environment(self):
        self.assertIs(pipette.load_plan(self.doc), self.doc)
        self.assertEqual(pipette.load_plan(self.path), self.doc)
        old = os.environ.get("PIPETTE_PLAN_FILE")
        os.environ["PIPETTE_PLAN_FILE"] = self.path
        try:
            self.assertEqual(pipette.load_plan(), self.doc)
            del os.environ["PIPETTE_PLAN_FILE"]
            with self.assertRaises(pipette.Error) as cm:
                pipette.load_plan()
            self.assertEqual(cm.exception.code, 2)
            self.assertIn("PIPETTE_PLAN_FILE", cm.exception.message)
        finally:
            if old is not None:
                os.environ["PIPETTE_PLAN_FILE"] = old

    def test_bad_files(self):
        missing = os.path.join(self.dir.name, "missing.json")
        with self.assertRaises(pipette.Error) as cm:
            pipette.load_plan(missing)
        self.assertEqual(cm.exception.message, missing + ": No such file or directory")
        bad = os.path.join(self.dir.name, "bad.json")
        with open(bad, "w") as f:
            f.write("{not json")
        with self.assertRaises(pipette.Error) as cm:
            pipette.load_plan(bad)
        self.assertTrue(cm.exception.message.startswith(bad + ": not JSON"))
        with self.assertRaises(pipette.Error) as cm:
            pipette.load_plan({"schema": "pipette-bw/1"})
        self.assertIn('schema: expected "pipette-plan/1"', cm.exception.message)


if __name__ == "__main__":
    unittest.main()
