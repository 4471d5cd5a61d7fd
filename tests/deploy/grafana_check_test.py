#!/usr/bin/env python3
"""Grafana's provisioning files and the dashboards, as Grafana reads them.

usage: grafana_check_test.py

Grafana is not packaged by Debian and its image cannot be pulled where this
runs, so this checks the files against the rules Grafana applies when it
provisions them (its provisioning readers and dashboard model), not Grafana
itself:
  - datasources file: apiVersion 1; each datasource has a name, a type, an
    access mode of proxy or direct, a URL and a uid of at most 40 characters
    of [A-Za-z0-9_-]; at most one default; the uid is unique;
  - dashboards file: apiVersion 1; each provider has a unique name, type
    file and options.path;
  - each dashboard: valid JSON with a title, a uid (40 characters,
    [A-Za-z0-9_-]) unique among the dashboards, an integer schemaVersion, no
    fixed numeric id (provisioned dashboards get theirs), panels (rows
    included) with unique integer ids, a type, a gridPos inside the 24-column
    grid, a datasource that is the provisioned one (by uid) and targets
    with unique refIds and a PromQL expression; template variables on the
    provisioned datasource; every $variable a panel uses is defined (or one
    of Grafana's built-in ones).
The queries themselves are run against a real Prometheus by
tests/scenarios/grafana_queries_e2e_test.
"""
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_util import REPO, check, log, main  # noqa: E402

import yaml  # noqa: E402

GRAFANA = os.path.join(REPO, "docker", "grafana")
UID = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
BUILTIN_VARS = {"__rate_interval", "__interval", "__interval_ms", "__range", "__range_s", "__range_ms",
                "__dashboard", "__from", "__to", "__name", "__org", "__user", "__all", "timeFilter"}


def panels_of(d):
    for p in d.get("panels", []):
        yield p
        for q in p.get("panels", []):  # collapsed rows
            yield q


def body():
    ds_file = os.path.join(GRAFANA, "provisioning", "datasources", "prometheus.yaml")
    ds = yaml.safe_load(open(ds_file))
    check(ds.get("apiVersion") == 1, "datasources apiVersion %s" % ds.get("apiVersion"))
    uids = {}
    defaults = 0
    for d in ds["datasources"]:
        for k in ("name", "type", "url", "uid"):
            check(d.get(k), "datasource %s lacks %s" % (d.get("name"), k))
        check(d.get("access", "proxy") in ("proxy", "direct"), "datasource access %s" % d.get("access"))
        check(UID.match(d["uid"]), "datasource uid %r" % d["uid"])
        check(d["uid"] not in uids, "datasource uid %s twice" % d["uid"])
        uids[d["uid"]] = d["type"]
        defaults += 1 if d.get("isDefault") else 0
    check(defaults <= 1, "%d default datasources" % defaults)
    log("datasources: %s" % uids)

    prov = yaml.safe_load(open(os.path.join(GRAFANA, "provisioning", "dashboards", "xpu.yaml")))
    check(prov.get("apiVersion") == 1, "dashboards apiVersion %s" % prov.get("apiVersion"))
    names = [p["name"] for p in prov["providers"]]
    check(len(names) == len(set(names)), "provider names %s" % names)
    for p in prov["providers"]:
        check(p.get("type", "file") == "file" and p.get("options", {}).get("path"), "provider %s" % p)
        for k in ("disableDeletion", "allowUiUpdates"):
            check(isinstance(p.get(k, False), bool), "provider %s: %s not a boolean" % (p["name"], k))
    log("dashboard providers: %s -> %s" % (names, [p["options"]["path"] for p in prov["providers"]]))

    files = sorted(glob.glob(os.path.join(GRAFANA, "dashboards", "*.json")))
    check(files, "no dashboards")
    seen = set()
    total = 0
    for f in files:
        name = os.path.basename(f)
        d = json.load(open(f))
        check(d.get("title"), "%s: no title" % name)
        check(UID.match(d.get("uid", "")), "%s: uid %r" % (name, d.get("uid")))
        check(d["uid"] not in seen, "%s: uid %s used twice" % (name, d["uid"]))
        seen.add(d["uid"])
        check(isinstance(d.get("schemaVersion"), int), "%s: schemaVersion %r" % (name, d.get("schemaVersion")))
        check(d.get("id") is None, "%s: fixed dashboard id %s" % (name, d.get("id")))
        variables = set()
        for v in d.get("templating", {}).get("list", []):
            variables.add(v["name"])
            if v.get("type") == "query":
                check(v.get("datasource", {}).get("uid") in uids, "%s: variable %s on datasource %s" % (
                    name, v["name"], v.get("datasource")))
        ids = set()
        for p in panels_of(d):
            where = "%s panel %r" % (name, p.get("title"))
            check(isinstance(p.get("id"), int) and p["id"] not in ids, "%s: id %r not unique" % (where, p.get("id")))
            ids.add(p["id"])
            check(p.get("type"), "%s: no type" % where)
            g = p.get("gridPos", {})
            check(all(isinstance(g.get(k), int) for k in "hwxy") and 0 < g["w"] <= 24 and g["x"] + g["w"] <= 24
                  and g["h"] > 0, "%s: gridPos %s" % (where, g))
            if p["type"] == "row":
                continue
            check(p.get("datasource", {}).get("uid") in uids, "%s: datasource %s is not provisioned" % (
                where, p.get("datasource")))
            refs = [t.get("refId") for t in p.get("targets", [])]
            check(refs and len(refs) == len(set(refs)) and all(refs), "%s: refIds %s" % (where, refs))
            for t in p["targets"]:
                check(t.get("expr"), "%s: target %s without expr" % (where, t.get("refId")))
                if "datasource" in t:
                    check(t["datasource"].get("uid") in uids, "%s: target datasource %s" % (where, t["datasource"]))
                for var in re.findall(r"\$\{?(\w+)", t["expr"]):
                    check(var in variables or var in BUILTIN_VARS, "%s: $%s is not defined" % (where, var))
            total += 1
        log("%s: %r, uid %s, %d panels" % (name, d["title"], d["uid"], len(ids)))
    log("%d dashboards, %d query panels, all on datasource uid %s" % (len(files), total, "/".join(uids)))


if __name__ == "__main__":
    main("grafana_check", body)
