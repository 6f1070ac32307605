"""``placement-webhook certs``: a CA and a serving certificate for ``SERVICE.NAMESPACE.svc``."""
from __future__ import annotations

import argparse
import ipaddress
import sys
from pathlib import Path

from webhook.exitcodes import Exit
from webhook.server import certs
from webhook.runtime.tls import CertificateError

HELP = "make a CA and a serving certificate"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--service", default="placement-webhook", help="the webhook's Service name")
    parser.add_argument("--namespace", default="placement-webhook", help="the Service's namespace")
    parser.add_argument("--out", default="certs", type=Path, help="output folder (default: certs)")
    parser.add_argument("--dns", action="append", default=[], metavar="NAME", help="extra DNS name (repeatable)")
    parser.add_argument("--ip", action="append", default=[], metavar="ADDR", help="extra IP address (repeatable)")
    parser.add_argument("--days", type=int, default=certs.SERVING_DAYS, help=f"serving certificate validity (default {certs.SERVING_DAYS})")
    parser.add_argument("--new-ca", action="store_true", help="replace an existing ca.crt/ca.key in --out")


def run(args: argparse.Namespace) -> int:
    """Write the files, then print the caBundle alone on stdout (for scripts)."""
    try:
        for addr in args.ip:
            ipaddress.ip_address(addr)
        if args.days < 1:
            raise ValueError(f"--days must be at least 1, not {args.days}")
    except ValueError as exc:
        print(f"placement-webhook certs: {exc}", file=sys.stderr)
        return Exit.USAGE
    out: Path = args.out
    try:
        ca = certs.ensure(out, service=args.service, namespace=args.namespace, dns=args.dns, ips=args.ip, days=args.days, new_ca=args.new_ca)
    except (OSError, ValueError, CertificateError) as exc:
        print(f"placement-webhook certs: {exc}", file=sys.stderr)
        return Exit.FINDINGS
    names = ", ".join(certs.service_dns_names(args.service, args.namespace) + args.dns + args.ip)
    print(f"wrote {out}/ca.crt, ca.key, tls.crt, tls.key for {names}", file=sys.stderr)
    print("caBundle for the MutatingWebhookConfiguration:", file=sys.stderr)
    print(certs.ca_bundle(ca))
    return Exit.OK
