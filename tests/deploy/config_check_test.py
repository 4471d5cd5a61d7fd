#!/usr/bin/env python3
"""The kit's configuration files, each with the tool that reads it.

usage: config_check_test.py BUILD_DIR WHAT

WHAT:
  prometheus    promtool check config (docker/prometheus/prometheus.yml and
                prometheus.replicas.yml),
                promtool test rules (one case per alert firing, and silent)
  alertmanager  amtool check-config; amtool config routes test for every
                team, for the engine's alerts and Prometheus's, and the default
  systemd       systemd-analyze verify on the units as `make install` writes
                them (PREFIX = a temporary directory, so the binaries exist)
  yaml          yamllint on every YAML file of docker/ and deploy/
"""
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_util import REPO, check, log, main, need, run, skip  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
WHAT = sys.argv[2]
DOCKER = os.path.join(REPO, "docker")


def prometheus():
    promtool = need("promtool", "Debian package prometheus")
    for cfg in ("prometheus.yml", "prometheus.replicas.yml"):
        r = run([promtool, "check", "config", os.path.join(DOCKER, "prometheus", cfg)])
        log(r.stdout.strip())
        check("SUCCESS: 7 rules found" in r.stdout or "rules found" in r.stdout, "%s: no rules loaded" % cfg)
    r = run([promtool, "test", "rules", "xputimer.rules.test.yml"], cwd=os.path.join(DOCKER, "prometheus/tests"))
    log(r.stdout.strip())
    check("SUCCESS" in r.stdout, "promtool test rules did not succeed")
    # Every alert of the rules file has a firing case in the unit tests.
    import yaml
    rules = yaml.safe_load(open(os.path.join(DOCKER, "prometheus/rules/xputimer.rules.yml")))
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    tests = yaml.safe_load(open(os.path.join(DOCKER, "prometheus/tests/xputimer.rules.test.yml")))
    fired = {t["alertname"] for case in tests["tests"] for t in case.get("alert_rule_test", [])
             if t.get("exp_alerts")}
    check(alerts == fired, "alerts without a firing test: %s" % sorted(alerts - fired))
    for g in rules["groups"]:
        for r in g["rules"]:
            check(r.get("labels", {}).get("team") or "team" in r["expr"] or r["alert"] == "XPUTimerDiagnosisActive",
                  "%s has no team label to route on" % r["alert"])
    log("%d alerts, each with a firing test: %s" % (len(alerts), ", ".join(sorted(alerts))))


def alertmanager():
    amtool = need("amtool", "Debian package prometheus-alertmanager")
    cfg = os.path.join(DOCKER, "alertmanager/alertmanager.yml")
    r = run([amtool, "check-config", cfg])
    log(r.stdout.strip().replace("\n", " | "))
    cases = [
        (["alertname=xpu_slow_gpu", "team=operations", "xpu_job=j", "kind=slow_gpu"], "operations"),
        (["alertname=xpu_slow_link", "team=infrastructure", "xpu_job=j"], "infrastructure"),
        (["alertname=xpu_gc_stall", "team=algorithm", "xpu_job=j"], "algorithm"),
        (["alertname=XPUTimerEngineDown", "team=infrastructure"], "infrastructure"),
        (["alertname=XPUTimerDiagnosisActive", "team=algorithm", "kind=dataloader"], "algorithm"),
        (["alertname=xpu_throughput_regression", "team=triage", "xpu_job=j"], "triage"),
        (["alertname=xpu_hang", "team=unknown"], "default"),
        (["alertname=Watchdog"], "default"),
    ]
    for labels, receiver in cases:
        r = run([amtool, "config", "routes", "test", "--config.file=" + cfg, "--verify.receivers=" + receiver]
                + labels, check_rc=False)
        got = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
        check(r.returncode == 0, "%s routed to '%s', expected %s" % (" ".join(labels), got, receiver))
        log("route %-60s -> %s" % (" ".join(labels), receiver))


def systemd():
    sa = need("systemd-analyze", "Debian package systemd")
    prefix = os.path.join(BUILD, "deploy-check", "systemd-prefix")
    run(["rm", "-rf", prefix])
    run(["make", "-C", REPO, "--no-print-directory", "install-only", "BUILD=" + BUILD, "PREFIX=" + prefix])
    units = sorted(glob.glob(os.path.join(prefix, "lib/systemd/system/*.service")))
    check(len(units) == 2, "units installed: %s" % units)
    r = run([sa, "verify"] + units, check_rc=False)
    out = r.stdout.strip()
    # Only this host's own unit files may be complained about (no systemd as
    # PID 1 in containers); nothing may name ours.
    ours = [l for l in out.splitlines() if "xpu-" in l]
    check(r.returncode == 0 and not ours, "systemd-analyze verify (rc %d):\n%s" % (r.returncode, out))
    log("systemd-analyze verify %s: rc 0%s" % (" ".join(os.path.basename(u) for u in units),
                                               (", said: " + out.replace("\n", " | ")) if out else ""))
    r = run([sa, "security", "--offline=true", "--no-pager"] + units, check_rc=False)
    for line in r.stdout.splitlines():
        if "Overall exposure level" in line:
            log("systemd-analyze security: %s" % line.strip())


def yaml_lint():
    yl = need("yamllint", "Debian package yamllint")
    files = [f for d in ("docker", "deploy") for f in glob.glob(os.path.join(REPO, d, "**", "*.y*ml"), recursive=True)
             if "/.local-bases/" not in f]
    conf = "{extends: default, rules: {line-length: {max: 120, level: warning}, document-start: disable, truthy: {check-keys: false}, " \
           "comments: {min-spaces-from-content: 1}, braces: {max-spaces-inside: 1}, indentation: {indent-sequences: whatever}}}"
    r = run([yl, "-f", "parsable", "-d", conf] + files, check_rc=False)
    check(r.returncode == 0, "yamllint:\n%s" % r.stdout)
    warnings = [l for l in r.stdout.splitlines() if "[warning]" in l]
    log("yamllint: %d files, no error, %d warnings (line length, comment indentation)" % (len(files), len(warnings)))


def body():
    {"prometheus": prometheus, "alertmanager": alertmanager, "systemd": systemd, "yaml": yaml_lint}[WHAT]()


if __name__ == "__main__":
    main("config_check_" + WHAT, body)
