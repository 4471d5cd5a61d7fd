"""Loopback HTTP(S) receiver for the HTTP client's tests.

Serves on 127.0.0.1 (port chosen by the kernel, written to --port-file once
listening). Every request is answered 200 with {"ok": true} when its
Authorization header equals --expect-authorization (or when none is
expected), else 401; each request is appended to --log as one JSON line
{method, path, authorization, content_type, body}. With --tls-cert and
--tls-key it speaks HTTPS. Exits by itself after --max-seconds.
"""
import argparse
import http.server
import json
import os
import ssl
import threading


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--expect-authorization", default=None)
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--max-seconds", type=float, default=60)
    args = ap.parse_args()
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode("utf-8", "replace") if length else ""
            auth = self.headers.get("Authorization")
            with lock, open(args.log, "a", encoding="utf-8") as f:
                f.write(json.dumps({"method": self.command, "path": self.path,
                                    "authorization": auth,
                                    "content_type": self.headers.get("Content-Type"),
                                    "body": body}) + "\n")
            ok = args.expect_authorization is None or auth == args.expect_authorization
            reply = json.dumps({"ok": ok}).encode()
            self.send_response(200 if ok else 401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        do_GET = _serve
        do_POST = _serve

        def log_message(self, *unused) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if args.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(tmp, args.port_file)
    threading.Timer(args.max_seconds, server.shutdown).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
