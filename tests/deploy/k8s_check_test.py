#!/usr/bin/env python3
"""The Kubernetes manifests, rendered and validated offline.

usage: k8s_check_test.py BUILD_DIR

  - `kubectl kustomize` renders the base, the production overlay and both
    examples (PyTorchJob, torchrun Job);
  - every object of a built-in kind is validated strictly against the
    Kubernetes OpenAPI schemas (kubernetes-validate, from the venv that
    tests/deploy/setup_tools.sh makes); a PyTorchJob's replica templates are
    validated as PodTemplates; the PrometheusRule is the rules file
    (gen_prometheus_rule.py --check) and passes `promtool check rules`; the
    ServiceMonitor selects the engine's Service and names its metrics port;
  - the training pods: the init container runs xpu-hook-install into a
    volume that the training container mounts, and LD_PRELOAD,
    NCCL_PROFILER_PLUGIN and the Python side exist at those paths in what
    the installed xpu-hook-install really writes; the daemon socket's
    directory is the hostPath where the DaemonSet's daemon binds it; the
    user's own container settings survive the patch;
  - engine and daemon flags are flags of the built programs; the probes
    and postStart hook name real ports and installed programs;
  - engine replicas (overlays/replicas, components/replicas): a StatefulSet
    of two or more pods whose --replica-id is the pod's name and whose
    --advertise-addr is the pod's name under the governing headless Service
    (which publishes pods before they are ready) and the gRPC port, both from
    the downward API; --db from the Secret's url, the password from a
    private copy of the Secret's pgpass (PGPASSFILE); no SQLite volume claim;
    a PodDisruptionBudget over the pods that leaves a quorum; probes on
    /healthz; the daemon's --engine lists exactly every pod's address; the
    ServiceMonitor's Service selects every replica.
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_util import REPO, check, log, main, need, run, skip  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
K8S = os.path.join(REPO, "deploy", "kubernetes")
VENV_PY = os.path.join(BUILD, "deploy-venv", "bin", "python")
K8S_VERSION = "1.30.0"
BUILTIN = {("v1", "Namespace"), ("v1", "Service"), ("apps/v1", "StatefulSet"), ("apps/v1", "DaemonSet"),
           ("batch/v1", "Job"), ("v1", "PodTemplate"), ("v1", "ConfigMap"), ("v1", "Secret"),
           ("policy/v1", "PodDisruptionBudget")}
VALIDATE = r"""
import json, sys, kubernetes_validate
out = []
for doc in json.load(sys.stdin):
    try:
        kubernetes_validate.validate(doc, sys.argv[1], strict=True)
        out.append("")
    except Exception as e:  # ValidationError, SchemaNotFoundError, ...
        out.append("%s: %s" % (type(e).__name__, e))
print(json.dumps(out))
"""


def render(path):
    import yaml
    r = run(["kubectl", "kustomize", path])
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def validate(docs):
    if not os.access(VENV_PY, os.X_OK):
        skip("no %s: kubernetes-validate not installed (make deploy-tools)" % VENV_PY)
    r = subprocess.run([VENV_PY, "-c", VALIDATE, K8S_VERSION], input=json.dumps(docs), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    check(r.returncode == 0, "kubernetes-validate failed to run:\n%s" % r.stdout)
    return json.loads(r.stdout.strip().splitlines()[-1])


def help_flags(binary):
    r = subprocess.run([binary, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return set(re.findall(r"--([a-z][a-z0-9-]*)", r.stdout))


def flags_known(args, known, what):
    for a in args:
        m = re.match(r"--([a-z0-9-]+)", a)
        check(m and m.group(1) in known, "%s: flag %s unknown to the program's --help" % (what, a))


def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}


def check_training_pod(spec, where, hook_tree, daemon_socket_host_dir, node_image, original):
    inits = {c["name"]: c for c in spec.get("initContainers", [])}
    check("xpu-hook-install" in inits, "%s: no xpu-hook-install init container" % where)
    init = inits["xpu-hook-install"]
    check(init["image"] == node_image, "%s: init image %s, DaemonSet runs %s" % (where, init["image"], node_image))
    check(init["command"][0] == "/opt/xputimer/bin/xpu-hook-install", "%s: init command %s" % (where, init["command"]))
    dest = init["command"][1]
    vols = {v["name"]: v for v in spec["volumes"]}
    init_mount = [m for m in init["volumeMounts"] if m["mountPath"] == dest]
    check(init_mount, "%s: the init container writes %s, which is no volume" % (where, dest))
    hook_vol = init_mount[0]["name"]
    check("emptyDir" in vols[hook_vol], "%s: hook volume %s is not an emptyDir" % (where, hook_vol))
    trainers = [c for c in spec["containers"] if c["name"] == original["name"]]
    check(len(trainers) == 1, "%s: training container %s not found" % (where, original["name"]))
    c = trainers[0]
    # The user's settings survive (merged, not replaced).
    check(c.get("image") == original["image"] and c.get("args") == original.get("args"),
          "%s: the patch replaced the container's image/args" % where)
    for e in original.get("env", []):
        check(env_of(c).get(e["name"]) == e, "%s: the patch dropped the container's env %s" % (where, e["name"]))
    for m in original.get("volumeMounts", []):
        check(m in c["volumeMounts"], "%s: the patch dropped the mount %s" % (where, m))
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    env = env_of(c)
    for var in ("LD_PRELOAD", "NCCL_PROFILER_PLUGIN"):
        path = env[var]["value"]
        base = [mp for mp, m in mounts.items() if m["name"] == hook_vol and path.startswith(mp + "/")]
        check(base, "%s: %s=%s is not inside the hook volume's mount" % (where, var, path))
        rel = path[len(base[0]) + 1:]
        check(os.path.isfile(os.path.join(hook_tree, rel)), "%s: %s=%s, but xpu-hook-install writes no %s" % (
            where, var, path, rel))
    lib_dir = os.path.dirname(env["LD_PRELOAD"]["value"])
    py = os.path.normpath(os.path.join(lib_dir, "..", "share", "xputimer", "python", "sitecustomize.py"))
    check(os.path.isfile(os.path.join(hook_tree, os.path.relpath(py, base[0]))),
          "%s: the hook's Python side (%s) is not in the volume" % (where, py))
    check(env["XPU_DAEMON"]["value"] == "off", "%s: the hook would start its own daemon in the pod" % where)
    sock = env["XPU_DAEMON_SOCKET"]["value"]
    sdir = os.path.dirname(sock)
    check(sdir in mounts, "%s: socket directory %s not mounted" % (where, sdir))
    hp = vols[mounts[sdir]["name"]].get("hostPath", {}).get("path")
    check(hp == daemon_socket_host_dir[0] and os.path.basename(sock) == daemon_socket_host_dir[1],
          "%s: socket %s on hostPath %s; the daemon binds %s on hostPath %s" % (
              where, sock, hp, daemon_socket_host_dir[1], daemon_socket_host_dir[0]))
    for var in ("XPU_JOB", "XPU_JOB_NAME"):
        check(var in env, "%s: %s not set" % (where, var))
    return env["LD_PRELOAD"]["value"]


def expand(s, env):
    """A container argument with $(VAR) replaced as the kubelet does."""
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), s)


def check_replicas(objs, eflags, dflags):
    """overlays/replicas: the engine as replicas on PostgreSQL."""
    ss = objs[("StatefulSet", "xpu-engine")]
    spec = ss["spec"]
    n = spec["replicas"]
    check(n >= 2, "engine replicas: %d" % n)
    check("volumeClaimTemplates" not in spec, "replicas keep the SQLite volume claim")
    pod = spec["template"]["spec"]
    ec = [c for c in pod["containers"] if c["name"] == "engine"][0]
    flags_known(ec["args"], eflags, "replicas engine")
    args = dict((a.split("=", 1) + [""])[:2] for a in ec["args"])
    env = env_of(ec)
    for var, field in (("POD_NAME", "metadata.name"), ("POD_NAMESPACE", "metadata.namespace")):
        check(env.get(var, {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == field,
              "engine env %s is not the pod's %s" % (var, field))
    check(args["--replica-id"] == "$(POD_NAME)", "--replica-id=%s, not the pod's name" % args["--replica-id"])
    headless = objs[("Service", spec["serviceName"])]["spec"]
    check(headless.get("clusterIP") == "None" and headless.get("publishNotReadyAddresses") is True,
          "governing Service %s: clusterIP %s, publishNotReadyAddresses %s" % (
              spec["serviceName"], headless.get("clusterIP"), headless.get("publishNotReadyAddresses")))
    labels = spec["template"]["metadata"]["labels"]
    check(all(labels.get(k) == v for k, v in headless["selector"].items()), "headless Service selects other pods")
    ns = ss["metadata"]["namespace"]
    grpc = [p["containerPort"] for p in ec["ports"] if p["name"] == "grpc"][0]
    check(int(args["--listen"].rsplit(":", 1)[1]) == grpc, "--listen %s vs port %d" % (args["--listen"], grpc))
    want_adv = "$(POD_NAME).%s.$(POD_NAMESPACE).svc:%d" % (spec["serviceName"], grpc)
    check(args["--advertise-addr"] == want_adv, "--advertise-addr=%s, want %s" % (args["--advertise-addr"], want_adv))
    pods = ["%s-%d" % (ss["metadata"]["name"], i) for i in range(n)]
    adverts = [expand(args["--advertise-addr"], {"POD_NAME": p, "POD_NAMESPACE": ns}) for p in pods]
    # The database: URL from the Secret, password from a private file.
    ref = env.get("XPU_DB_URL", {}).get("valueFrom", {}).get("secretKeyRef", {})
    check(args["--db"] == "$(XPU_DB_URL)" and ref.get("key") == "url",
          "--db=%s from %s, not the Secret's url" % (args["--db"], ref))
    secret = ref["name"]
    pgpass = env.get("PGPASSFILE", {}).get("value", "")
    mounts = {m["mountPath"]: m for m in ec["volumeMounts"]}
    vols = {v["name"]: v for v in pod["volumes"]}
    pdir = os.path.dirname(pgpass)
    check(pdir in mounts and "emptyDir" in vols[mounts[pdir]["name"]],
          "PGPASSFILE=%s is not in an emptyDir mounted by the engine" % pgpass)
    inits = [c for c in pod.get("initContainers", []) if any(
        m["name"] == mounts[pdir]["name"] and m["mountPath"] == pdir for m in c.get("volumeMounts", []))]
    check(len(inits) == 1, "no init container writes %s" % pgpass)
    init = inits[0]
    check(init["image"] == ec["image"], "init image %s, engine %s" % (init["image"], ec["image"]))
    script = init["command"][-1]
    src = [m for m in init["volumeMounts"] if "secret" in vols[m["name"]]]
    check(src and vols[src[0]["name"]]["secret"]["secretName"] == secret,
          "the init container does not read the Secret %s" % secret)
    check("umask 077" in script and ("%s/pgpass" % src[0]["mountPath"]) in script and (">" + pgpass) in script,
          "the init container does not copy %s/pgpass privately to %s: %s" % (src[0]["mountPath"], pgpass, script))
    check(not any("password" in a.lower() for a in ec["args"]), "a password on the engine's command line")
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        check(ec[probe]["httpGet"] == {"path": "/healthz", "port": "metrics"}, "replica %s" % probe)
    # Disruptions.
    pdb = objs[("PodDisruptionBudget", "xpu-engine")]["spec"]
    check(all(labels.get(k) == v for k, v in pdb["selector"]["matchLabels"].items()), "PDB selects other pods")
    check(pdb.get("maxUnavailable") == 1 or (pdb.get("minAvailable") or 0) >= n - 1,
          "PDB %s lets more than one replica go at once" % pdb)
    # The daemon: every replica.
    dc = objs[("DaemonSet", "xpu-daemon")]["spec"]["template"]["spec"]["containers"][0]
    flags_known(dc["args"], dflags, "replicas daemon")
    engines = [a.split("=", 1)[1] for a in dc["args"] if a.startswith("--engine=")][0].split(",")
    check(sorted(engines) == sorted(adverts), "daemon --engine %s; the replicas advertise %s" % (engines, adverts))
    check("--insecure" in dc["args"] or any(a.startswith("--tls-ca") for a in dc["args"]),
          "the daemon would refuse plaintext redirects between replicas")
    # Prometheus: the ServiceMonitor's Service has every replica behind it.
    sm = objs[("ServiceMonitor", "xpu-engine")]["spec"]
    svcs = [o for (k, _), o in objs.items() if k == "Service" and all(
        o["metadata"].get("labels", {}).get(a) == b for a, b in sm["selector"]["matchLabels"].items())
        and sm["endpoints"][0]["port"] in [p["name"] for p in o["spec"]["ports"]]]
    check(len(svcs) == 1 and all(labels.get(k) == v for k, v in svcs[0]["spec"]["selector"].items()),
          "ServiceMonitor scrapes %s, not every replica" % [s["metadata"]["name"] for s in svcs])
    log("replicas: %d pods, --replica-id=$(POD_NAME), --advertise-addr=%s; --db from Secret %s, PGPASSFILE %s "
        "(init container %s); PDB %s; daemon --engine %s; ServiceMonitor via Service %s" % (
            n, args["--advertise-addr"], secret, pgpass, init["name"], pdb, ",".join(engines),
            svcs[0]["metadata"]["name"]))


def body():
    import yaml
    need("kubectl", "kubectl kustomize renders the manifests")
    need("promtool", "Debian package prometheus")
    engine_bin = os.path.join(BUILD, "engine", "xpu-engine")
    daemon_bin = os.path.join(BUILD, "daemon", "xpu-daemon")
    check(os.access(engine_bin, os.X_OK) and os.access(daemon_bin, os.X_OK), "engine/daemon not built")

    # What the node image holds, and what xpu-hook-install copies out of it.
    tmp = os.path.join(BUILD, "deploy-check", "k8s")
    run(["rm", "-rf", tmp])
    prefix = os.path.join(tmp, "opt-xputimer")
    run(["make", "-C", REPO, "--no-print-directory", "install-only", "BUILD=" + BUILD, "PREFIX=" + prefix])
    hook_tree = os.path.join(tmp, "hook-volume")
    r = run([os.path.join(prefix, "bin", "xpu-hook-install"), hook_tree])
    log(r.stdout.strip())

    rendered = {}
    for name in ("base", "overlays/production", "overlays/replicas", "examples/pytorchjob", "examples/torchrun-job"):
        rendered[name] = render(os.path.join(K8S, name))
        log("kubectl kustomize %s: %s" % (name, ", ".join(d["kind"] for d in rendered[name])))

    # OpenAPI validation of built-in kinds, PyTorchJob templates as PodTemplates.
    docs, where = [], []
    for name, objs in rendered.items():
        for d in objs:
            if (d["apiVersion"], d["kind"]) in BUILTIN:
                docs.append(d)
                where.append("%s %s/%s" % (name, d["kind"], d["metadata"]["name"]))
            elif d["kind"] == "PyTorchJob":
                for role, rs in d["spec"]["pytorchReplicaSpecs"].items():
                    docs.append({"apiVersion": "v1", "kind": "PodTemplate",
                                 "metadata": {"name": "%s-%s" % (d["metadata"]["name"], role.lower())},
                                 "template": rs["template"]})
                    where.append("%s PyTorchJob/%s %s template" % (name, d["metadata"]["name"], role))
    errors = validate(docs)
    bad = ["%s: %s" % (w, e) for w, e in zip(where, errors) if e]
    check(not bad, "Kubernetes %s schema:\n%s" % (K8S_VERSION, "\n".join(bad)))
    log("kubernetes-validate --strict (Kubernetes %s): %d objects valid" % (K8S_VERSION, len(docs)))

    # Custom resources of the Prometheus operator.
    prod = {(d["kind"], d["metadata"]["name"]): d for d in rendered["overlays/production"]}
    run([sys.executable, os.path.join(K8S, "gen_prometheus_rule.py"), "--check"])
    rule = prod[("PrometheusRule", "xputimer")]
    rules_file = os.path.join(tmp, "prometheusrule.rules.yml")
    with open(rules_file, "w") as f:
        yaml.safe_dump({"groups": rule["spec"]["groups"]}, f)
    r = run(["promtool", "check", "rules", rules_file])
    log("PrometheusRule: %s" % r.stdout.strip().splitlines()[-1].strip())
    sm = prod[("ServiceMonitor", "xpu-engine")]
    svc = prod[("Service", "xpu-engine")]
    sel = sm["spec"]["selector"]["matchLabels"]
    check(all(svc["metadata"]["labels"].get(k) == v for k, v in sel.items()), "ServiceMonitor selects %s" % sel)
    check(sm["spec"]["endpoints"][0]["port"] in [p["name"] for p in svc["spec"]["ports"]], "ServiceMonitor port")
    check(not sm["spec"]["endpoints"][0].get("honorLabels"),
          "ServiceMonitor: no honorLabels (series carry xpu_job; `job` stays the scrape job's)")
    check(sm["metadata"].get("namespace") == svc["metadata"]["namespace"], "ServiceMonitor namespace")
    log("ServiceMonitor selects Service xpu-engine, port %s" % sm["spec"]["endpoints"][0]["port"])

    # Engine and daemon.
    eflags, dflags = help_flags(engine_bin), help_flags(daemon_bin)
    check_replicas({(d["kind"], d["metadata"]["name"]): d for d in rendered["overlays/replicas"]}, eflags, dflags)
    for name in ("base", "overlays/production"):
        objs = {(d["kind"], d["metadata"]["name"]): d for d in rendered[name]}
        ss = objs[("StatefulSet", "xpu-engine")]["spec"]
        ec = ss["template"]["spec"]["containers"][0]
        flags_known(ec["args"], eflags, name + " engine")
        ports = {p["name"]: p["containerPort"] for p in ec["ports"]}
        margs = [a for a in ec["args"] if a.startswith("--metrics-addr=")][0]
        check(int(margs.rsplit(":", 1)[1]) == ports["metrics"], "metrics port %s vs %s" % (margs, ports))
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            check(ec[probe]["httpGet"] == {"path": "/healthz", "port": "metrics"}, "engine %s" % probe)
        check(ss["volumeClaimTemplates"][0]["metadata"]["name"] in [m["name"] for m in ec["volumeMounts"]],
              "engine volume not mounted")
        check(any(a == "--db=/var/lib/xpu/engine.db" for a in ec["args"]) and
              any(m["mountPath"] == "/var/lib/xpu" for m in ec["volumeMounts"]), "engine db not on the volume")
        ds = objs[("DaemonSet", "xpu-daemon")]["spec"]["template"]["spec"]
        dc = ds["containers"][0]
        flags_known([a for a in dc["args"]], dflags, name + " daemon")
        check(ds.get("hostPID") is True, "daemon without hostPID")
        caps = dc["securityContext"]["capabilities"]
        check(caps["drop"] == ["ALL"] and "SYS_PTRACE" in caps["add"] and not dc["securityContext"].get("privileged"),
              "daemon capabilities %s" % caps)
        post = dc["lifecycle"]["postStart"]["exec"]["command"]
        check(os.access(post[0].replace("/opt/xputimer", prefix), os.X_OK), "postStart %s not installed" % post[0])
        check(os.access(dc["command"][0].replace("/opt/xputimer", prefix), os.X_OK), "daemon command not installed")
        sock = [a.split("=", 1)[1] for a in dc["args"] if a.startswith("--socket=")][0]
        mnt = [m for m in dc["volumeMounts"] if m["mountPath"] == os.path.dirname(sock)][0]
        hostdir = [v for v in ds["volumes"] if v["name"] == mnt["name"]][0]["hostPath"]["path"]
        engine_addr = [a.split("=", 1)[1] for a in dc["args"] if a.startswith("--engine=")][0]
        svc = objs[("Service", "xpu-engine")]
        check(engine_addr == "xpu-engine.%s.svc:%d" % (svc["metadata"]["namespace"], svc["spec"]["ports"][0]["port"]),
              "daemon --engine=%s vs Service %s" % (engine_addr, svc["spec"]["ports"]))
        node_image = dc["image"]
        log("%s: engine flags, probes on :%d/healthz, volume; daemon hostPID, caps %s, socket %s on hostPath %s" % (
            name, ports["metrics"], caps["add"], sock, hostdir))

    # Training pods.
    base_ds = {(d["kind"], d["metadata"]["name"]): d for d in rendered["base"]}[("DaemonSet", "xpu-daemon")]
    node_image = base_ds["spec"]["template"]["spec"]["containers"][0]["image"]
    originals = {}
    for f in ("examples/pytorchjob/pytorchjob.yaml", "examples/torchrun-job/job.yaml"):
        d = yaml.safe_load(open(os.path.join(K8S, f)))
        if d["kind"] == "Job":
            originals[("Job", "")] = d["spec"]["template"]["spec"]["containers"][0]
        else:
            for role, rs in d["spec"]["pytorchReplicaSpecs"].items():
                originals[("PyTorchJob", role)] = rs["template"]["spec"]["containers"][0]
    n = 0
    for name in ("examples/pytorchjob", "examples/torchrun-job"):
        for d in rendered[name]:
            if d["kind"] == "Job":
                pods = [("", d["spec"]["template"]["spec"])]
            else:
                pods = [(role, rs["template"]["spec"]) for role, rs in d["spec"]["pytorchReplicaSpecs"].items()]
            for role, spec in pods:
                where = "%s %s %s" % (name, d["kind"], role)
                pre = check_training_pod(spec, where, hook_tree, (hostdir, os.path.basename(sock)), node_image,
                                         originals[(d["kind"], role)])
                n += 1
    log("%d training pod specs: LD_PRELOAD=%s inside the hook volume, plugin and Python side there, "
        "socket on the daemon's hostPath, the user's container kept" % (n, pre))


if __name__ == "__main__":
    main("k8s_check", body)
