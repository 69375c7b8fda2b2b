//! The store conformance suite. Every test here runs unchanged against a real throwaway
//! PostgreSQL cluster and against SQLite: the `conformance!` macro instantiates each async test
//! function once per backend.

mod fixtures;
mod invariants;
mod queue;
mod resources;
mod transactions;

/// Instantiates `module::test(db)` for both backends as `postgres::module_test` and
/// `sqlite::module_test`.
macro_rules! conformance {
    ($($module:ident :: $name:ident),* $(,)?) => {
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$module::$name(occ_testkit::TestDb::postgres().await).await
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$module::$name(occ_testkit::TestDb::sqlite().await).await
                }
            )*
        }
    };
}

conformance!(
    transactions::migrations_are_idempotent,
    transactions::concurrent_migrations_are_safe,
    transactions::upgrading_gives_existing_namespaces_the_built_in_roles_and_presets,
    transactions::failed_transaction_leaves_no_row,
    transactions::dropped_transaction_commits_nothing,
    transactions::read_sessions_are_read_only,
    transactions::lost_database_is_dependency_unavailable,
    invariants::ids_names_and_timestamps_are_checked,
    invariants::configuration_kind_and_generation_are_bounded,
    invariants::revisions_are_immutable,
    invariants::revision_snapshot_shape_is_exact,
    invariants::revisions_are_deleted_only_with_their_agent,
    invariants::revision_source_stays_within_its_agent,
    invariants::references_never_cross_namespaces,
    invariants::referenced_configuration_cannot_be_deleted,
    invariants::namespace_lifecycle_is_enforced,
    invariants::workspace_setup_completion_erases_files,
    invariants::audit_is_append_only,
    invariants::one_live_claim_per_lane,
    invariants::work_shapes_and_keys_are_checked,
    invariants::agent_invariants_hold,
    resources::resources_round_trip,
    resources::generation_compare_and_swap_has_one_winner_per_generation,
    resources::agent_deletion_finalizer_removes_everything,
    resources::iam_policy_snapshot,
    resources::runtime_role_assignments,
    resources::launch_tickets_are_redeemed_once,
    resources::accounts_sessions_and_keys,
    resources::service_principals_disable_delete_and_teardown,
    queue::enqueue_is_idempotent_per_key,
    queue::two_workers_claim_each_item_exactly_once,
    queue::expired_lease_is_reclaimed_and_late_completion_refused,
    queue::defer_refunds_and_retry_exhausts,
    queue::claims_respect_lanes_and_availability,
    queue::recovery_fails_exhausted_namespace_work,
    queue::transitions_write_evidence,
    queue::committed_work_wakes_listeners,
    resources::admission_is_one_atomic_step,
);
