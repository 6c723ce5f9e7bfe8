#!/usr/bin/env python3
"""Extract the field names of torchtitan's and Megatron-Bridge's config
classes from their source, for tests/data/python/config-fields.tsv.

    tests/python/extract_fields.py TORCHTITAN_GIT BRIDGE_GIT MEGATRON_LM_GIT \
        > tests/data/python/config-fields.tsv

Each argument is a git directory (a clone's .git, or a bare mirror) holding
the commits below; files are read with `git show COMMIT:PATH` and parsed
with the ast module, never imported.  A class's fields are its annotated
class-body names (ClassVar excluded) and those of its bases, followed
through the files' imports into the three repositories (package
__init__.py re-exports and relative imports included).  A base outside the
three repositories (torch's Stateful, typing.Generic, ...) contributes no
fields and is named on stderr.

The forms the adapters of python/pipette/adapters.py serve:
  torchtitan        Trainer.Config of torchtitan after v0.2.2, at HEAD
  torchtitan-0.2.2  JobConfig, the TOML-era config of torchtitan v0.2.2
  megatron-bridge   ConfigContainer, with GPTModelProvider as its model;
                    the Megatron-Core classes it derives from are read at
                    the Megatron-LM commit the Bridge pins (its submodule
                    3rdparty/Megatron-LM).
Run by hand when the commits move; make check reads only the TSV.
"""

import ast
import subprocess
import sys

TORCHTITAN = "b5bcd76c66d0acb1a08b176d9639425bc55e0b2a"
TORCHTITAN_022 = "73a0e6979dd10b6b1904098eb3c8f62c18ab87ce"  # tag v0.2.2
BRIDGE = "067f987df03b8355b03192d88d70f1709fedf51a"
MEGATRON_LM = "2a75ac12c54ba6a42b34024756820bf819a2e25f"  # Bridge's 3rdparty/Megatron-LM

# form -> (repository, commit, file, class) of its top object and the
# attribute paths listed: path -> class of that attribute in that file.
FORMS = {
    "torchtitan": ("torchtitan", TORCHTITAN, "torchtitan/trainer.py", "Trainer.Config", {
        "training": ("torchtitan/config/configs.py", "TrainingConfig"),
        "parallelism": ("torchtitan/config/configs.py", "ParallelismConfig"),
        "compile": ("torchtitan/config/configs.py", "CompileConfig"),
        "activation_checkpoint:SelectiveAC.Config":
            ("torchtitan/distributed/activation_checkpoint.py", "SelectiveAC.Config"),
        "activation_checkpoint:FullAC.Config":
            ("torchtitan/distributed/activation_checkpoint.py", "FullAC.Config"),
    }),
    "torchtitan-0.2.2": ("torchtitan", TORCHTITAN_022, "torchtitan/config/job_config.py",
                         "JobConfig", {
        "training": ("torchtitan/config/job_config.py", "Training"),
        "parallelism": ("torchtitan/config/job_config.py", "Parallelism"),
        "activation_checkpoint": ("torchtitan/config/job_config.py", "ActivationCheckpoint"),
        "compile": ("torchtitan/config/job_config.py", "Compile"),
    }),
    "megatron-bridge": ("bridge", BRIDGE, "src/megatron/bridge/training/config.py",
                        "ConfigContainer", {
        "model": ("src/megatron/bridge/models/gpt_provider.py", "GPTModelProvider"),
        "train": ("src/megatron/bridge/training/config.py", "TrainingConfig"),
        "ddp": ("src/megatron/bridge/training/config.py", "DistributedDataParallelConfig"),
        "optimizer": ("src/megatron/bridge/training/config.py", "OptimizerConfig"),
        "dataset": ("src/megatron/bridge/training/config.py", "GPTDatasetConfig"),
        "comm_overlap": ("src/megatron/bridge/training/comm_overlap.py", "CommOverlapConfig"),
        "mixed_precision": ("src/megatron/bridge/training/mixed_precision.py",
                            "MixedPrecisionConfig"),
    }),
}

# module prefix -> (repository, folder of that package's root)
ROOTS = [("torchtitan", "torchtitan", ""), ("megatron.bridge", "bridge", "src/"),
         ("megatron.core", "megatron", ""), ("megatron.training", "megatron", "")]
COMMITS = {"torchtitan": None, "bridge": BRIDGE, "megatron": MEGATRON_LM}


class Source:
    def __init__(self, gitdirs):
        self.gitdirs = gitdirs
        self.cache = {}

    def read(self, repo, commit, path):
        key = (repo, commit, path)
        if key not in self.cache:
            r = subprocess.run(["git", "--git-dir", self.gitdirs[repo], "show",
                                "%s:%s" % (commit, path)], capture_output=True, text=True)
            self.cache[key] = ast.parse(r.stdout, path) if r.returncode == 0 else None
        return self.cache[key]

    def module_file(self, module, commit_of):
        """(repo, commit, path) of a dotted module, or None (outside)."""
        for prefix, repo, root in ROOTS:
            if module == prefix or module.startswith(prefix + "."):
                base = root + module.replace(".", "/")
                commit = commit_of(repo)
                for path in (base + ".py", base + "/__init__.py"):
                    if self.read(repo, commit, path) is not None:
                        return repo, commit, path
        return None


def find_class(tree, dotted):
    body = tree.body
    node = None
    for part in dotted.split("."):
        node = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == part), None)
        if node is None:
            return None
        body = node.body
    return node


def imported(tree, name, path):
    """The (module, name) a file imports `name` from, or None."""
    for n in tree.body:
        if isinstance(n, ast.ImportFrom):
            for a in n.names:
                if (a.asname or a.name) == name:
                    mod = n.module or ""
                    if n.level:
                        # level 1: the package the file is in (or is)
                        parts = path[:-3].split("/")
                        pkg = parts[:len(parts) - n.level]
                        # the package's dotted name below its root folder
                        pkg = [p for p in pkg if p != "src"]
                        mod = ".".join(pkg + ([mod] if mod else []))
                    return mod, a.name
    return None


class Extractor:
    def __init__(self, source, commit_of):
        self.src = source
        self.commit_of = commit_of
        self.outside = set()

    def resolve(self, repo, commit, path, dotted, depth=0):
        """(repo, commit, path, ClassDef) of a class named in a file."""
        tree = self.src.read(repo, commit, path)
        if tree is None or depth > 8:
            return None
        head, _, rest = dotted.partition(".")
        node = find_class(tree, dotted)
        if node is not None:
            return repo, commit, path, node
        imp = imported(tree, head, path)
        if imp is None:
            return None
        where = self.src.module_file(imp[0], self.commit_of)
        if where is None:
            self.outside.add("%s.%s" % imp)
            return None
        return self.resolve(*where, imp[1] + ("." + rest if rest else ""), depth + 1)

    def fields(self, repo, commit, path, dotted):
        """[(field, 'repo@commit:path:line')] of a class and its bases, bases first."""
        r = self.resolve(repo, commit, path, dotted)
        if r is None:
            raise SystemExit("extract_fields: %s not found from %s:%s" % (dotted, repo, path))
        merged = {}
        # a field a subclass declares again keeps its place, with the last source
        for f, where in self.node_fields(*r, set()):
            merged[f] = where
        return list(merged.items())

    def node_fields(self, repo, commit, path, node, seen):
        out = []
        for b in node.bases:
            name = ast.unparse(b.value if isinstance(b, ast.Subscript) else b)
            rb = self.resolve(repo, commit, path, name)
            if rb is None:
                self.outside.add(name)
                continue
            key = (rb[0], rb[2], rb[3].lineno)
            if key not in seen:
                seen.add(key)
                out += self.node_fields(*rb, seen)
        for n in node.body:
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
                if "ClassVar" in ast.unparse(n.annotation):
                    continue
                out.append((n.target.id, "%s@%s:%s:%d" % (repo, commit[:8], path, n.lineno)))
        return out


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    src = Source({"torchtitan": sys.argv[1], "bridge": sys.argv[2], "megatron": sys.argv[3]})
    print("# Field names of the config classes pipette's Python adapters set")
    print("# (python/pipette/adapters.py), extracted by tests/python/extract_fields.py from")
    print("# pytorch/torchtitan %s (HEAD form) and %s (tag v0.2.2)," % (TORCHTITAN, TORCHTITAN_022))
    print("# NVIDIA-NeMo/Megatron-Bridge %s and NVIDIA/Megatron-LM %s" % (BRIDGE, MEGATRON_LM))
    print("# (the Bridge's 3rdparty/Megatron-LM).  Columns: form, the attribute path of the")
    print("# object (. = the config itself; NAME:CLASS = an attribute holding that class),")
    print("# field, where it is declared (repository@commit:file:line).")
    print("form\tpath\tfield\tdeclared")
    for form, (repo, commit, path, cls, sections) in FORMS.items():
        ex = Extractor(src, lambda r, c=commit, rp=repo: c if r == rp else COMMITS[r])
        for field, where in ex.fields(repo, commit, path, cls):
            print("%s\t.\t%s\t%s" % (form, field, where))
        for sec, (spath, scls) in sections.items():
            for field, where in ex.fields(repo, commit, spath, scls):
                print("%s\t%s\t%s\t%s" % (form, sec, field, where))
        for o in sorted(ex.outside):
            print("extract_fields: %s: base %s is outside the repositories (no fields taken)"
                  % (form, o), file=sys.stderr)


if __name__ == "__main__":
    main()
