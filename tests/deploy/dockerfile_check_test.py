#!/usr/bin/env python3
"""Every step of the Dockerfiles, checked without an image builder.

usage: dockerfile_check_test.py BUILD_DIR

For docker/Dockerfile and docker/standins.Dockerfile (Prometheus,
Alertmanager, PostgreSQL 15 with docker/postgres/xpu-postgres-entrypoint):
  - syntax: known instructions, continuations, exec-form ENTRYPOINT/CMD,
    every FROM a build argument or an earlier stage, the targets
    engine/node/demo present, labels (version, revision, source, title) on
    every image, a non-root USER for engine and demo;
  - apt-get: --no-install-recommends and the lists removed in the same step;
    the build stage's packages are the Makefile's DEB_PACKAGES (plus the
    tools named here);
  - COPY from the context: each source exists and .dockerignore keeps it;
  - the build stage's install: its `make install-only` / `make install-demo`
    lines are run as written on this machine's build (DESTDIR and BUILD
    moved to a temporary directory), and every COPY --from=build source
    exists in what they installed;
  - the runtime stage's packages provide every shared library that the
    installed programs load (ldd, then dpkg -S, with the packages' own
    dependencies and Debian's required packages);
  - ENTRYPOINT/CMD programs exist in the installed tree and their flags are
    flags of `xpu-engine --help` / `xpu-daemon --help`.
"""
import fnmatch
import glob
import json
import os
import re
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_util import REPO, check, log, main, need, run  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME",
                "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL", "MAINTAINER"}
# Build-stage tools beyond the Makefile's DEB_PACKAGES.
BUILD_EXTRA = {"ninja-build", "ccache", "make"}


class Stage:
    def __init__(self, base, name):
        self.base, self.name, self.steps = base, name, []


def parse(path):
    """(global ARGs {name: default}, [Stage]) of a Dockerfile."""
    lines = open(path).read().split("\n")
    logical, cur = [], ""
    for raw in lines:
        s = raw.strip()
        if not cur and (not s or s.startswith("#")):
            continue
        if cur and s.startswith("#"):
            continue  # comment inside a continued instruction
        if s.endswith("\\"):
            cur += s[:-1] + " "
            continue
        cur += s
        logical.append(cur)
        cur = ""
    check(not cur, "%s ends inside a continued line" % path)
    args, stages = {}, []
    for l in logical:
        word, _, rest = l.partition(" ")
        ins = word.upper()
        check(ins in INSTRUCTIONS, "%s: unknown instruction %s" % (path, word))
        check(word == ins, "%s: instruction %s not in upper case" % (path, word))
        if ins == "FROM":
            parts = rest.split()
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(parts[0], name))
        elif not stages:
            check(ins == "ARG", "%s: %s before the first FROM" % (path, ins))
            k, _, v = rest.partition("=")
            args[k] = v
        else:
            stages[-1].steps.append((ins, rest))
    return args, stages


def docker_ignore():
    pats = []
    for l in open(os.path.join(REPO, ".dockerignore")):
        l = l.strip()
        if l and not l.startswith("#"):
            pats.append(l.rstrip("/"))
    return pats


def ignored(rel, pats):
    parts = rel.split("/")
    for p in pats:
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            if fnmatch.fnmatch(prefix, p) or (p.startswith("**/") and fnmatch.fnmatch(parts[i - 1], p[3:])):
                return True
    return False


def copy_args(rest):
    words = shlex.split(rest)
    opts = {}
    while words and words[0].startswith("--"):
        k, _, v = words.pop(0)[2:].partition("=")
        opts[k] = v
    if words and words[0].startswith("["):
        words = json.loads(rest[rest.index("["):])
    return opts, words[:-1], words[-1]


def makefile_deb_packages():
    text = open(os.path.join(REPO, "Makefile")).read()
    m = re.search(r"^DEB_PACKAGES := (.*?)(?<!\\)\n", text, re.S | re.M)
    return set(m.group(1).replace("\\\n", " ").split())


def apt_installs(rest):
    """Packages of every `apt-get install` in a RUN line."""
    out = []
    for part in re.split(r"&&|;", rest):
        w = part.split()
        if "apt-get" in w and "install" in w:
            check("--no-install-recommends" in w, "apt-get install without --no-install-recommends: %s" % part)
            out += [x for x in w[w.index("install") + 1:] if not x.startswith("-")]
    if out:
        check("rm -rf /var/lib/apt/lists/*" in rest, "apt lists not removed in the same step: %s" % rest[:80])
    return out


def required_closure(roots):
    """Installed packages reachable from roots through Depends/Pre-Depends,
    plus Debian's required packages (in every base image)."""
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${Priority}\t${Depends}, ${Pre-Depends}\n"],
                         stdout=subprocess.PIPE, text=True).stdout
    deps, required = {}, set()
    for line in out.splitlines():
        pkg, prio, dep = line.split("\t")
        deps[pkg] = [re.split(r"[ (:]", alt.strip())[0] for d in dep.split(",") if d.strip()
                     for alt in d.split("|")[:1]]
        if prio == "required":
            required.add(pkg)
    seen, todo = set(), list(roots) + list(required)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        todo += deps.get(p, [])
    return seen


def lib_packages(files):
    """{debian package: [library]} that the ELF files load (ldd, dpkg -S)."""
    libs = set()
    for f in files:
        r = subprocess.run(["ldd", f], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        check("not found" not in r.stdout, "ldd %s: a library is not found:\n%s" % (f, r.stdout))
        for m in re.finditer(r"=> (/\S+)", r.stdout):
            libs.add(os.path.realpath(m.group(1)))
    owner = {}
    for batch in (sorted(libs), sorted(alt_path(l) for l in libs)):
        r = subprocess.run(["dpkg", "-S"] + [l for l in batch if l not in owner and alt_path(l) not in owner],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        for line in r.stdout.splitlines():
            pkg, _, path = line.partition(": ")
            owner[path] = pkg.split(":")[0].split(",")[0].strip()
    pkgs = {}
    for lib in sorted(libs):
        pkg = owner.get(lib) or owner.get(alt_path(lib))
        check(pkg, "no Debian package owns %s" % lib)
        pkgs.setdefault(pkg, []).append(os.path.basename(lib))
    return pkgs


def alt_path(lib):
    """The other spelling of a library's path on a merged-/usr system."""
    return lib.replace("/usr/lib/", "/lib/", 1) if lib.startswith("/usr/lib/") else "/usr" + lib


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def help_flags(binary):
    r = subprocess.run([binary, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return set(re.findall(r"--([a-z][a-z0-9-]*)", r.stdout))


def body():
    need("dpkg", "Debian's dpkg maps libraries to packages")
    need("ldd")
    pats = docker_ignore()
    deb = makefile_deb_packages()
    tmp = os.path.join(BUILD, "deploy-check", "dockerfile")
    run(["rm", "-rf", tmp])

    # --- docker/Dockerfile ---------------------------------------------------------
    path = os.path.join(REPO, "docker", "Dockerfile")
    args, stages = parse(path)
    names = [s.name for s in stages]
    log("docker/Dockerfile: %d stages %s, build arguments %s" % (len(stages), names, sorted(args)))
    for a in ("BASE_IMAGE", "CUDA_IMAGE"):
        check(args.get(a), "ARG %s has no default" % a)
    for i, s in enumerate(stages):
        check(s.base.startswith("${") or s.base in names[:i] or s.base == "scratch",
              "stage %s starts FROM %s: neither a build argument nor an earlier stage" % (s.name, s.base))
    for t in ("engine", "node", "demo"):
        check(t in names, "no target %s" % t)
    by = {s.name: s for s in stages}

    # Context COPYs.
    n_ctx = 0
    for s in stages:
        for ins, rest in s.steps:
            if ins not in ("COPY", "ADD"):
                continue
            opts, srcs, dest = copy_args(rest)
            if "from" in opts:
                check(opts["from"] in names, "COPY --from=%s: no such stage" % opts["from"])
                continue
            for src in srcs:
                check(os.path.exists(os.path.join(REPO, src)), "COPY %s: not in the repository" % src)
                check(not ignored(src, pats), "COPY %s: excluded by .dockerignore" % src)
                for root, _, files in os.walk(os.path.join(REPO, src)):
                    for f in files:
                        rel = os.path.relpath(os.path.join(root, f), REPO)
                        check(not rel.startswith("build"), "COPY %s would send build output %s" % (src, rel))
                n_ctx += 1
    # The sources the compile needs are all copied: every top-level CMake directory.
    copied = {copy_args(rest)[1][0].split("/")[0] for ins, rest in by["build"].steps if ins == "COPY"
              and "from" not in copy_args(rest)[0]}
    for d in re.findall(r"add_subdirectory\((\w+)\)", open(os.path.join(REPO, "CMakeLists.txt")).read()):
        check(d in copied, "add_subdirectory(%s) but the build stage does not COPY %s" % (d, d))
    log("%d COPY steps from the context: sources present, none excluded by .dockerignore" % n_ctx)

    # apt-get lines.
    build_pkgs, runtime_pkgs = [], []
    for s in stages:
        for ins, rest in s.steps:
            if ins == "RUN":
                pk = apt_installs(rest)
                if s.name == "build":
                    build_pkgs += pk
                elif s.name == "runtime":
                    runtime_pkgs += pk
    extra = set(build_pkgs) - deb - BUILD_EXTRA
    check(not extra, "build stage installs packages that are not in the Makefile's DEB_PACKAGES: %s" % sorted(extra))
    log("build stage: %d packages, all in DEB_PACKAGES or %s" % (len(build_pkgs), sorted(BUILD_EXTRA)))

    # The build stage's install lines, run here as written.
    installs = []
    for ins, rest in by["build"].steps:
        if ins == "RUN" and "make install" in rest:
            for part in rest.split("&&"):
                w = shlex.split(part)
                if w and w[0] == "make":
                    installs.append(w)
    check([w[1] for w in installs] == ["install-only", "install-demo"], "build stage install lines: %s" % installs)
    trees = {}
    for w in installs:
        vars_ = dict(x.split("=", 1) for x in w[2:])
        check(vars_.get("BUILD") == "/build", "%s: BUILD=%s" % (w[1], vars_.get("BUILD")))
        dest = os.path.join(tmp, vars_["DESTDIR"].strip("/"))
        trees[vars_["DESTDIR"]] = dest
        vars_.update(BUILD=BUILD, DESTDIR=dest)
        run(["make", "-C", REPO, "--no-print-directory", w[1]] + ["%s=%s" % kv for kv in vars_.items()])
        log("ran %s -> %s" % (" ".join(w), dest))
    prefix = dict(x.split("=", 1) for x in installs[0][2:])["PREFIX"]

    def local(p):
        for d, t in trees.items():
            if p.startswith(d + "/"):
                return t + p[len(d):]
        return None
    n_from = 0
    for s in stages:
        for ins, rest in s.steps:
            opts, srcs, dest = copy_args(rest) if ins == "COPY" else ({}, [], "")
            if opts.get("from") != "build":
                continue
            for src in srcs:
                lp = local(src)
                check(lp and os.path.exists(lp), "stage %s: COPY --from=build %s: not installed by %s" % (
                    s.name, src, [" ".join(w) for w in installs]))
                n_from += 1
    log("%d COPY --from=build sources all present in what make install-only/install-demo wrote" % n_from)

    # Libraries of the installed programs vs the runtime packages.
    out = trees["/out"] + prefix
    elves = [f for f in glob.glob(out + "/bin/*") + glob.glob(out + "/lib/*.so*") +
             glob.glob(out + "/share/xputimer/python/xputimer/*.so") if is_elf(f)]
    check(len(elves) >= 7, "installed ELF files: %s" % elves)
    needed = lib_packages(elves)
    have = required_closure(set(runtime_pkgs))
    missing = {p: l for p, l in needed.items() if p not in have}
    check(not missing, "runtime stage lacks the packages of %s" % missing)
    log("runtime stage: %d packages (with their dependencies) provide all %d libraries of %d installed programs" % (
        len(runtime_pkgs), sum(len(v) for v in needed.values()), len(elves)))

    # Final images.
    eng_flags = help_flags(os.path.join(out, "bin/xpu-engine"))
    dmn_flags = help_flags(os.path.join(out, "bin/xpu-daemon"))
    check(len(eng_flags) > 10 and len(dmn_flags) > 10, "cannot read --help of the installed programs")
    labels_of = {}
    for s in stages:
        labels_of[s.name] = set(re.findall(r"(org\.opencontainers\.image\.\w+)=", " ".join(
            r for i, r in s.steps if i == "LABEL"))) | labels_of.get(s.base, set())
    for t in ("engine", "node", "demo"):
        s = by[t]
        labels = labels_of[t]
        for l in ("version", "revision", "source", "title", "description"):
            check("org.opencontainers.image." + l in labels, "image %s lacks label %s" % (t, l))
        users = [r for i, r in s.steps if i == "USER"]
        if t in ("engine", "demo"):
            check(users and users[-1] not in ("root", "0"), "image %s runs as root" % t)
        for ins in ("ENTRYPOINT", "CMD"):
            steps = [r for i, r in s.steps if i == ins]
            for r in steps:
                argv = json.loads(r)  # exec form only
                for a in argv:
                    if a.startswith(prefix + "/"):
                        check(os.path.exists(local("/out" + a) or local("/out-demo" + a) or "")
                              or os.path.exists(trees["/out-demo"] + a), "image %s: %s %s not installed" % (t, ins, a))
                    m = re.match(r"--([a-z0-9-]+)", a)
                    if m and t == "engine":
                        check(m.group(1) in eng_flags, "engine %s flag --%s unknown to xpu-engine" % (ins, m.group(1)))
                    if m and t == "node":
                        check(m.group(1) in dmn_flags, "node %s flag --%s unknown to xpu-daemon" % (ins, m.group(1)))
    log("engine, node, demo: labels, users, exec-form ENTRYPOINT/CMD, programs installed, flags known")

    # --- docker/standins.Dockerfile ------------------------------------------------
    args, stages = parse(os.path.join(REPO, "docker", "standins.Dockerfile"))
    check({s.name for s in stages} == {"prometheus", "alertmanager", "postgres"},
          "stand-in targets %s" % [s.name for s in stages])
    pats = docker_ignore()
    for s in stages:
        check(s.base == "${BASE_IMAGE}", "stand-in %s FROM %s" % (s.name, s.base))
        pkgs, copied = [], {}
        for ins, rest in s.steps:
            if ins == "RUN":
                pkgs += apt_installs(rest)
            elif ins == "COPY":
                src, dst = rest.split()
                check(os.access(os.path.join(REPO, src), os.X_OK) and not ignored(src, pats),
                      "stand-in %s: COPY %s not in the context or not executable" % (s.name, src))
                copied[dst] = src
        ep = json.loads([r for i, r in s.steps if i == "ENTRYPOINT"][0])
        if ep[0] in copied:
            # Our entrypoint script: the server it starts must come from the
            # stage's Debian packages.
            script = open(os.path.join(REPO, copied[ep[0]])).read()
            server = re.search(r'exec "\$PGBIN/(\w+)"', script)
            check(server and "/usr/lib/postgresql/*/bin" in script, "stand-in %s: no server in %s" % (
                s.name, copied[ep[0]]))
            prog = glob.glob("/usr/lib/postgresql/*/bin/" + server.group(1))
            check(prog, "stand-in %s: no %s here to check (Debian package postgresql-15)" % (s.name, server.group(1)))
            owner = subprocess.run(["dpkg", "-S", prog[0]], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                   text=True).stdout.split(":")[0]
            check(owner in pkgs, "stand-in %s: %s is in %s, which the stage does not install (%s)" % (
                s.name, prog[0], owner, pkgs))
            env = " ".join(r for i, r in s.steps if i == "ENV")
            check(os.path.dirname(prog[0]) in env, "stand-in %s: PATH lacks %s (pg_isready for health checks)" % (
                s.name, os.path.dirname(prog[0])))
            continue
        pkg = subprocess.run(["dpkg", "-S", ep[0]], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        check(pkg.returncode == 0, "stand-in %s: %s is not a Debian package's program here" % (s.name, ep[0]))
    log("docker/standins.Dockerfile: prometheus, alertmanager, postgres from Debian's packages")


if __name__ == "__main__":
    main("dockerfile_check", body)
