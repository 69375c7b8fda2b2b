//! `/namespaces/{namespaceId}/iam/roles` and `/access-bindings`.

use axum::extract::State;
use axum::response::IntoResponse;

use crate::envelope::{NoContent, created, ok};
use crate::error::ApiError;
use crate::extract::{Ctx, DEFAULT_LIMIT, JsonBody, NoBody, Params};
use crate::inputs::{
    BindingCreateBody, NamespaceBindingCreateBody, RoleCreateBody, RuntimeRoleBody,
};
use crate::openapi::{Data, ErrorBody};
use crate::state::AppState;
use crate::views::{BindingView, PermissionsView, RoleView};

/// The Installation's own Roles (occ extension): what account creation's `roleId` may name,
/// the bootstrap administrator Role among them (Installation administrators).
#[utoipa::path(get, path = "/iam/roles", operation_id = "listInstallationRoles", tag = "IAM",
    responses((status = 200, body = Data<Vec<RoleView>>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub async fn list_installation_roles(
    State(s): State<AppState>,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let list = s.controller.installation_role_list(&ctx.req).await?;
    Ok(ok(list.iter().map(RoleView::from).collect::<Vec<_>>()))
}

/// Roles of the Namespace.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/iam/roles", operation_id = "listIAMRoles", tag = "IAM",
    params(("namespaceId" = String, Path)),
    responses((status = 200, body = Data<Vec<RoleView>>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list_roles(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let list = s.controller.role_list(&ctx.req, p.ns()?).await?;
    Ok(ok(list.iter().map(RoleView::from).collect::<Vec<_>>()))
}

/// Create a Namespace Role.
#[utoipa::path(post, path = "/namespaces/{namespaceId}/iam/roles", operation_id = "createIAMRole", tag = "IAM",
    params(("namespaceId" = String, Path)), request_body = RoleCreateBody,
    responses((status = 201, body = Data<RoleView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn create_role(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    JsonBody(body): JsonBody<DEFAULT_LIMIT>,
) -> Result<impl IntoResponse, ApiError> {
    let input = RoleCreateBody::parse(&body)?;
    let role = s
        .controller
        .role_create(&ctx.req, p.ns()?, input.into())
        .await?;
    Ok(created(RoleView::from(&role)))
}

/// One Role.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/iam/roles/{roleId}", operation_id = "getIAMRole", tag = "IAM",
    params(("namespaceId" = String, Path), ("roleId" = String, Path)),
    responses((status = 200, body = Data<RoleView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_role(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let role = s.controller.role_get(&ctx.req, p.ns()?, p.iam()?).await?;
    Ok(ok(RoleView::from(&role)))
}

/// Delete a Role no binding uses.
#[utoipa::path(delete, path = "/namespaces/{namespaceId}/iam/roles/{roleId}", operation_id = "deleteIAMRole", tag = "IAM",
    params(("namespaceId" = String, Path), ("roleId" = String, Path)),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn delete_role(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    _: NoBody,
) -> Result<impl IntoResponse, ApiError> {
    s.controller
        .role_delete(&ctx.req, p.ns()?, p.iam()?)
        .await?;
    Ok(NoContent)
}

/// AccessBindings of the Namespace.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/iam/access-bindings", operation_id = "listIAMAccessBindings", tag = "IAM",
    params(("namespaceId" = String, Path)),
    responses((status = 200, body = Data<Vec<BindingView>>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list_bindings(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let list = s.controller.binding_list(&ctx.req, p.ns()?).await?;
    Ok(ok(list.iter().map(BindingView::from).collect::<Vec<_>>()))
}

/// Grant a Role on one exact resource to an identity.
#[utoipa::path(post, path = "/namespaces/{namespaceId}/iam/access-bindings", operation_id = "createIAMAccessBinding", tag = "IAM",
    params(("namespaceId" = String, Path)), request_body = BindingCreateBody,
    responses((status = 201, body = Data<BindingView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn create_binding(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    JsonBody(body): JsonBody<DEFAULT_LIMIT>,
) -> Result<impl IntoResponse, ApiError> {
    let input = BindingCreateBody::parse(&body)?;
    let binding = s
        .controller
        .binding_create(&ctx.req, p.ns()?, input.into())
        .await?;
    Ok(created(BindingView::from(&binding)))
}

/// Grant a Role on the whole Namespace to an identity (occ extension): it covers every
/// resource of the Namespace, present and future. The caller's own grants must cover every
/// permission of the Role there; `agent:administer` stands in for `agent:read_logs`, and for a
/// person also for `agent:use`. Listed, read and deleted with the exact bindings.
#[utoipa::path(post, path = "/namespaces/{namespaceId}/iam/namespace-bindings", operation_id = "createIAMNamespaceAccessBinding", tag = "IAM",
    params(("namespaceId" = String, Path)), request_body = NamespaceBindingCreateBody,
    responses((status = 201, body = Data<BindingView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn create_namespace_binding(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    JsonBody(body): JsonBody<DEFAULT_LIMIT>,
) -> Result<impl IntoResponse, ApiError> {
    let input = NamespaceBindingCreateBody::parse(&body)?;
    let binding = s
        .controller
        .binding_create(&ctx.req, p.ns()?, input.into())
        .await?;
    Ok(created(BindingView::from(&binding)))
}

/// One AccessBinding.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/iam/access-bindings/{bindingId}", operation_id = "getIAMAccessBinding", tag = "IAM",
    params(("namespaceId" = String, Path), ("bindingId" = String, Path)),
    responses((status = 200, body = Data<BindingView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_binding(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let binding = s
        .controller
        .binding_get(&ctx.req, p.ns()?, p.iam()?)
        .await?;
    Ok(ok(BindingView::from(&binding)))
}

/// Delete an AccessBinding.
#[utoipa::path(delete, path = "/namespaces/{namespaceId}/iam/access-bindings/{bindingId}", operation_id = "deleteIAMAccessBinding", tag = "IAM",
    params(("namespaceId" = String, Path), ("bindingId" = String, Path)),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn delete_binding(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    _: NoBody,
) -> Result<impl IntoResponse, ApiError> {
    s.controller
        .binding_delete(&ctx.req, p.ns()?, p.iam()?)
        .await?;
    Ok(NoContent)
}

/// Assign the runtime role a person holds in an Agent's native Control UI (a person's exact
/// Agent binding whose Role grants `use`; Installation administrators).
#[utoipa::path(patch, path = "/namespaces/{namespaceId}/iam/access-bindings/{bindingId}/runtime-role", operation_id = "updateIAMRuntimeRole", tag = "IAM",
    params(("namespaceId" = String, Path), ("bindingId" = String, Path)), request_body = RuntimeRoleBody,
    responses((status = 200, body = Data<BindingView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn update_runtime_role(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    JsonBody(body): JsonBody<DEFAULT_LIMIT>,
) -> Result<impl IntoResponse, ApiError> {
    let input = RuntimeRoleBody::parse(&body)?;
    let binding = s
        .controller
        .binding_set_runtime_role(&ctx.req, p.ns()?, p.iam()?, input.runtime_role.0)
        .await?;
    Ok(ok(BindingView::from(&binding)))
}

/// What the caller may do in the Namespace: actions on the Namespace, on its collections, on
/// each Agent it may read and on their Configurations. occ's own route (not in the reference
/// API), answered without audit records; needs `namespace:read`.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/iam/permissions", operation_id = "getNamespacePermissions", tag = "IAM",
    params(("namespaceId" = String, Path)),
    responses((status = 200, body = Data<PermissionsView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_permissions(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
) -> Result<impl IntoResponse, ApiError> {
    let ns = p.ns()?;
    let permissions = s.controller.namespace_permissions(&ctx.req, ns).await?;
    Ok(ok(PermissionsView::new(ns, &permissions)))
}
