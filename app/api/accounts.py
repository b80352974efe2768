"""JSON API for accounts: who am I, and my SSH keys. Authenticate with
``Authorization: Bearer <token>`` (tokens are created on /account and shown once)."""

from __future__ import annotations

from typing import Any

import fastapi
from pydantic import BaseModel, Field

from app.accounts import service
from app.accounts.audit import client_ip
from app.accounts.deps import CurrentUser
from app.accounts.models import SshKey
from app.api.jsonbody import StrictJSONRoute
from app.web.deps import NowDep, SessionDep
from app.web.params import RowId

router = fastapi.APIRouter(prefix="/api/v1", tags=["account"], route_class=StrictJSONRoute)


def _key(k: SshKey) -> dict[str, Any]:
    return {
        "id": k.id,
        "name": k.name,
        "type": k.key_type,
        "bits": k.bits,
        "fingerprint": k.fingerprint,
        "public_key": k.public_key,
        "created_at": k.created_at.isoformat(),
    }


@router.get("/me")
def me(user: CurrentUser) -> dict[str, Any]:
    """The account the token (or session) belongs to."""
    return {"id": user.id, "email": user.email, "role": user.role}


@router.get("/ssh-keys")
def list_keys(db: SessionDep, user: CurrentUser) -> list[dict[str, Any]]:
    assert user.id is not None
    return [_key(k) for k in service.ssh_keys_for(db, user.id)]


class NewKey(BaseModel):
    name: str = Field(default="", max_length=80)
    public_key: str = Field(max_length=16384)


@router.post("/ssh-keys", status_code=201)
def add_key(
    request: fastapi.Request, db: SessionDep, user: CurrentUser, now: NowDep, body: NewKey
) -> dict[str, Any]:
    """Add a public key (ed25519, ecdsa, RSA ≥ 2048). Private keys are refused, not kept."""
    return _key(
        service.add_ssh_key(db, user, body.name, body.public_key, now, ip=client_ip(request))
    )


@router.delete("/ssh-keys/{key_id}", status_code=204)
def delete_key(
    request: fastapi.Request, db: SessionDep, user: CurrentUser, now: NowDep, key_id: RowId
) -> fastapi.Response:
    service.delete_ssh_key(db, user, key_id, now, ip=client_ip(request))
    return fastapi.Response(status_code=204)
