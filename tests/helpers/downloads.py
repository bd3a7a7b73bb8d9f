"""The signed download route: the signed path of a purchase, the download log."""

from __future__ import annotations

from sqlalchemy import select

from cmsshop.models import DownloadLog

CONTENT = bytes(range(256)) * 40  # 10240 bytes


def signed_path(client, purchase) -> str:
    url = client.post(f"/api/dashboard/downloads/{purchase.entitlement.id}/signed-url").json["url"]
    assert url.startswith("http://localhost/api/downloads/")
    return url[len("http://localhost") :]


def logs(dbsession) -> list[DownloadLog]:
    dbsession.commit()  # end the read transaction: see what the app committed since
    return list(dbsession.scalars(select(DownloadLog).order_by(DownloadLog.id)))
