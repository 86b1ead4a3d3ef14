"""FastAPI dependencies: the runtime and the caller's tenant."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from api.runtime import Runtime


async def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


async def tenant_of(request: Request) -> str:
    """The tenant of the caller's key (api/edge.py put it there); every store call is scoped
    by it."""
    tenant: str = request.state.tenant
    return tenant


RuntimeDep = Annotated[Runtime, Depends(_runtime)]
TenantDep = Annotated[str, Depends(tenant_of)]
