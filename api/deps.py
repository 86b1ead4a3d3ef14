"""FastAPI dependencies: the runtime and the caller's tenant."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from api.runtime import Runtime


async def _runtime(request: Request) -> Runtime:
    return request.app.state.runtime


async def _tenant(request: Request) -> str:
    # One tenant until API keys land; every store call is already scoped by it.
    return request.app.state.runtime.tenant_id


RuntimeDep = Annotated[Runtime, Depends(_runtime)]
TenantDep = Annotated[str, Depends(_tenant)]
