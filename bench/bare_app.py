"""The bare baseline of the server benchmark: an aiohttp TLS app that only parses the JSON.

    python bench/bare_app.py --port 9443 --tls-cert tls.crt --tls-key tls.key

It reads the body, parses it, and answers a fixed allowed AdmissionReview with the uid:
the least any webhook must do, served by the same aiohttp and TLS stack as the real one.
``--json stdlib`` (the default, the issue's baseline) parses as ``await request.json()``
would; ``--json codec`` parses with the webhook's own codec (msgspec), for comparison.
"""
from __future__ import annotations

import argparse
import json
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web


def handler(loads: Callable[[bytes], Any], dumps: Callable[[Any], bytes]) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def mutate(request: web.Request) -> web.Response:
        review = loads(await request.read())
        answer = {
            "apiVersion": review["apiVersion"],
            "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True},
        }
        return web.Response(body=dumps(answer), content_type="application/json")

    return mutate


def codecs(name: str) -> tuple[Callable[[bytes], Any], Callable[[Any], bytes]]:
    if name == "codec":
        from webhook import codec

        return codec.loads, codec.dumps
    return json.loads, lambda value: json.dumps(value).encode()


async def readyz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tls-cert", required=True)
    parser.add_argument("--tls-key", required=True)
    parser.add_argument("--json", choices=("stdlib", "codec"), default="stdlib")
    args = parser.parse_args()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(args.tls_cert, args.tls_key)
    app = web.Application(client_max_size=7 * 1024 * 1024)
    app.add_routes([web.post("/mutate", handler(*codecs(args.json))), web.get("/readyz", readyz)])
    web.run_app(app, host=args.host, port=args.port, ssl_context=ctx, access_log=None, print=None)


if __name__ == "__main__":
    main()
