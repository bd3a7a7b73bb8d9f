"""The SSRF guard in production mode (private addresses refused): literal addresses, names
answered by a DNS server on loopback (tests/fakes/fake_dns.py), DNS rebinding between the
check at save time and the delivery; and in development mode, a name the fake DNS
resolves to loopback is delivered to the address that was checked (pinning)."""

from __future__ import annotations

import pytest
from fakes.fake_dns import FakeDns
from fakes.webhook_receiver import WebhookReceiver, make_certificate
from helpers.webhook_delivery import add_endpoint, attempts, deliveries, emit
from sqlalchemy import delete

from cmsshop.models import WebhookEndpoint
from cmsshop.services.webhooks import addresses
from cmsshop.services.webhooks.delivery import deliver_due

PUBLIC = "93.184.215.14"


@pytest.fixture
def receiver(webhook_receiver):
    return webhook_receiver


@pytest.fixture
def fake_dns():
    server = FakeDns().start()
    yield server
    server.stop()


@pytest.fixture
def production(make_app, fake_dns):
    return make_app(
        **{
            "cmsshop.webhooks.allow_private_addresses": False,
            "cmsshop.webhooks.nameservers": fake_dns.nameserver,
        }
    )


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1:{port}/hook",
        "http://127.0.0.1:{port}/hook",
        "https://10.1.2.3:{port}/hook",
        "https://169.254.169.254/latest/meta-data/",
        "https://[::1]:{port}/hook",
        "https://[::ffff:127.0.0.1]:{port}/hook",
        "https://localhost:{port}/hook",
        "https://loopback.test:{port}/hook",
        "https://private.test:{port}/hook",
        "https://mixed.test:{port}/hook",
        "https://metadata.test/latest/meta-data/",
    ],
)
def test_production_refuses_private_addresses_without_a_request(
    production, dbsession, receiver, fake_dns, url
):
    fake_dns.names["loopback.test"] = [["127.0.0.1"]]
    fake_dns.names["private.test"] = [["192.168.1.20"]]
    fake_dns.names["mixed.test"] = [[PUBLIC, "127.0.0.1"]]
    fake_dns.names["metadata.test"] = [["169.254.169.254"]]
    add_endpoint(dbsession, url.format(port=receiver.port))
    emit(dbsession)
    report = deliver_due(production.registry)
    assert report.retried == 1
    assert receiver.received == []
    [logged] = attempts(dbsession)
    assert logged.outcome == "refused_address"
    assert logged.status_code is None
    assert logged.error
    assert deliveries(dbsession)[0].status == "pending"


def test_dns_rebinding_to_loopback_after_the_save_time_check_is_refused(
    production, dbsession, receiver, fake_dns
):
    fake_dns.names["rebind.test"] = [[PUBLIC], ["127.0.0.1"]]
    url = f"https://rebind.test:{receiver.port}/hook"
    settings = production.registry.settings
    resolver = addresses.make_resolver(settings)
    # When the admin saves it, the name is public.
    assert addresses.url_problem(url, allow_private=False, resolver=resolver) is None
    add_endpoint(dbsession, url)
    emit(dbsession)
    deliver_due(production.registry)
    assert receiver.received == []
    [logged] = attempts(dbsession)
    assert logged.outcome == "refused_address"
    assert "127.0.0.1" in logged.error
    assert fake_dns.queries["rebind.test"] == 2


def test_an_unknown_name_is_a_network_error(production, dbsession, fake_dns):
    add_endpoint(dbsession, "https://nowhere.test/hook")
    emit(dbsession)
    deliver_due(production.registry)
    [logged] = attempts(dbsession)
    assert logged.outcome == "network_error"
    assert "nowhere.test" in logged.error


def test_development_delivers_to_the_checked_address_of_a_name(
    make_app, dbsession, receiver, fake_dns
):
    app = make_app(**{"cmsshop.webhooks.nameservers": fake_dns.nameserver})
    fake_dns.names["hook.test"] = [["127.0.0.1"]]
    endpoint, secret = add_endpoint(dbsession, f"http://hook.test:{receiver.port}/hook")
    receiver.secrets = [secret]
    emit(dbsession)
    # The system resolver does not know hook.test: only a pinned connection gets there.
    assert deliver_due(app.registry).succeeded == 1
    [got] = receiver.received
    assert got.headers["Host"] == f"hook.test:{receiver.port}"
    assert got.verified_with == [secret]
    assert fake_dns.queries["hook.test"] == 1


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("https://93.184.215.14/hook", None),
        ("https://[2606:4700::6810:84e5]/hook", None),
        ("http://93.184.215.14/hook", "https"),
        ("ftp://93.184.215.14/hook", "https"),
        ("https://user:pw@93.184.215.14/hook", "user name"),
        ("https:///hook", "no host"),
        ("https://93.184.215.14:0/hook", "port"),
        ("https://93.184.215.14:70000/hook", "ort"),
        ("https://127.0.0.1/hook", "loopback"),
        ("https://0.0.0.0/hook", "not allowed"),
        ("https://10.0.0.1/hook", "private"),
        ("https://172.16.5.4/hook", "private"),
        ("https://192.168.0.1/hook", "private"),
        ("https://100.64.0.1/hook", "not allowed"),
        ("https://169.254.169.254/hook", "link-local"),
        ("https://224.0.0.1/hook", "multicast"),
        ("https://240.0.0.1/hook", "not allowed"),
        ("https://255.255.255.255/hook", "not allowed"),
        ("https://[::]/hook", "not allowed"),
        ("https://[fe80::1]/hook", "link-local"),
        ("https://[fc00::1]/hook", "private"),
        ("https://[::ffff:10.0.0.1]/hook", "private"),
        ("https://[64:ff9b::a9fe:a9fe]/hook", "link-local"),
        ("https://[2002:7f00:1::]/hook", "loopback"),
        ("https://[ff02::1]/hook", "multicast"),
        ("https://2130706433/hook", "legacy form"),
        ("https://0x7f.1/hook", "legacy form"),
    ],
)
def test_url_problems_in_production(url, problem):
    found = addresses.url_problem(url, allow_private=False, resolver=None)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_development_allows_http_and_loopback_but_not_userinfo():
    assert addresses.url_problem("http://127.0.0.1:8080/x", allow_private=True) is None
    assert addresses.url_problem("http://localhost/x", allow_private=True) is None
    assert "user name" in addresses.url_problem("http://a:b@localhost/x", allow_private=True)


def test_every_answer_of_a_name_is_checked(fake_dns):
    fake_dns.names["mixed.test"] = [[PUBLIC, "::1"]]
    resolver = addresses.NameserverResolver([fake_dns.nameserver])
    problem = addresses.url_problem("https://mixed.test/", allow_private=False, resolver=resolver)
    assert "::1" in problem


@pytest.fixture
def tls_receiver(tmp_path, monkeypatch):
    cert, key = make_certificate(tmp_path, "hook.test")
    # The worker trusts the system's CAs: make this self-signed one of them.
    monkeypatch.setenv("SSL_CERT_FILE", cert)
    receiver = WebhookReceiver(tls=(cert, key)).start()
    yield receiver
    receiver.stop()


def test_https_to_a_pinned_address_verifies_the_certificate_of_the_name(
    make_app, dbsession, tls_receiver, fake_dns
):
    app = make_app(**{"cmsshop.webhooks.nameservers": fake_dns.nameserver})
    fake_dns.names["hook.test"] = [["127.0.0.1"]]
    fake_dns.names["other.test"] = [["127.0.0.1"]]
    _, secret = add_endpoint(dbsession, tls_receiver.url(host="hook.test"))
    tls_receiver.secrets = [secret]
    emit(dbsession)
    assert deliver_due(app.registry).succeeded == 1
    assert tls_receiver.server_names == ["hook.test"]
    assert tls_receiver.received[0].verified_with == [secret]

    # The same address under a name the certificate is not for: no request.
    dbsession.execute(delete(WebhookEndpoint))
    dbsession.commit()
    add_endpoint(dbsession, tls_receiver.url(host="other.test"))
    emit(dbsession)
    assert deliver_due(app.registry).retried == 1
    [logged] = [a for a in attempts(dbsession) if a.outcome != "succeeded"]
    assert logged.outcome == "network_error"
    assert "certificate" in logged.error.lower() or "ssl" in logged.error.lower()
    assert len(tls_receiver.received) == 1


@pytest.mark.parametrize(
    ("entry", "parsed"),
    [
        ("9.9.9.9", ("9.9.9.9", 53)),
        ("127.0.0.1:5353", ("127.0.0.1", 5353)),
        ("2620:fe::fe", ("2620:fe::fe", 53)),
        ("[2620:fe::fe]:5353", ("2620:fe::fe", 5353)),
    ],
)
def test_nameserver_entries(entry, parsed):
    assert addresses.parse_nameserver(entry) == parsed


def test_a_nameserver_must_be_an_address():
    with pytest.raises(ValueError):
        addresses.parse_nameserver("dns.example")
