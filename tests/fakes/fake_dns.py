"""A DNS server on loopback (UDP) answering what a test says, for the SSRF tests: point
``cmsshop.webhooks.nameservers`` at it.

``names[name] = [["203.0.113.7"], ["127.0.0.1"]]``: the first A query for ``name`` is
answered with the first list, the next with the second, and so on (the last repeats): a
name that rebinds to loopback after the check at save time. IPv6 addresses in a list
answer AAAA queries. Unknown names get NXDOMAIN. ``queries`` counts the queries per name.
Built on dnspython's message classes (a different library's parser would do as well).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections import Counter

import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset


class FakeDns:
    def __init__(self):
        self.names: dict[str, list[list[str]]] = {}
        self.queries: Counter = Counter()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind(("127.0.0.1", 0))
        self._stopping = threading.Event()
        self._lock = threading.Lock()

    @property
    def nameserver(self) -> str:
        host, port = self._sock.getsockname()
        return f"{host}:{port}"

    def _addresses(self, name: str) -> list[str] | None:
        with self._lock:
            answers = self.names.get(name)
            if answers is None:
                return None
            index = self.queries[name]
            self.queries[name] += 1
            return answers[min(index, len(answers) - 1)]

    def answer(self, query: dns.message.Message) -> dns.message.Message:
        response = dns.message.make_response(query)
        response.flags |= dns.flags.AA
        question = query.question[0]
        name = question.name.to_text(omit_final_dot=True).lower()
        if question.rdtype == dns.rdatatype.A:
            found = self._addresses(name)
        else:
            with self._lock:
                answers = self.names.get(name)
            found = answers[-1] if answers is not None else None
        if found is None:
            response.set_rcode(dns.rcode.NXDOMAIN)
            return response
        version = 4 if question.rdtype == dns.rdatatype.A else 6
        matching = [a for a in found if ipaddress.ip_address(a).version == version]
        if matching and question.rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA):
            response.answer.append(
                dns.rrset.from_text_list(question.name, 1, "IN", question.rdtype, matching)
            )
        return response

    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                data, peer = self._sock.recvfrom(4096)
            except OSError:
                return
            try:
                query = dns.message.from_wire(data)
            except Exception:  # noqa: BLE001 - a garbled datagram: ignore it, as servers do
                continue
            self._sock.sendto(self.answer(query).to_wire(), peer)

    def start(self) -> FakeDns:
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._sock.close()
