//! The Configuration Driver contract, as occ's controller relies on it, checked against any
//! Driver (filesystem, Kubernetes against the fake API server, Kubernetes against a real
//! cluster). `ns` must be a Namespace the Driver can store documents for.

use occ_core::resource::Generation;
use occ_core::{ConfigurationId, NamespaceId, Timestamp};
use occ_drivers::DriverError;
use occ_drivers::configuration::{ConfigurationDriver, DocumentKey};
use serde_json::{Map, Value, json};

fn doc(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => unreachable!("documents are objects"),
    }
}

/// Runs every contract check; panics naming the first that fails.
pub async fn run(driver: &ConfigurationDriver, ns: &NamespaceId) {
    create_read_update_delete(driver, ns).await;
    undo_restores_the_committed_generation(driver, ns).await;
    a_leftover_generation_is_replaced_only_when_asked(driver, ns).await;
    oversized_documents_are_refused(driver, ns).await;
}

fn key<'a>(ns: &'a NamespaceId, id: &'a ConfigurationId, g: u64, at: Timestamp) -> DocumentKey<'a> {
    DocumentKey {
        namespace_id: ns,
        configuration_id: id,
        generation: Generation::new(g).expect("generation"),
        created_at: at,
    }
}

async fn create_read_update_delete(driver: &ConfigurationDriver, ns: &NamespaceId) {
    let id = ConfigurationId::generate();
    let at = Timestamp::now();
    let v1 = doc(json!({"gateway": {"mode": "local"}, "agents": {"defaults": {"model": "a"}}}));
    let v2 = doc(json!({"gateway": {"mode": "local"}, "agents": {"defaults": {"model": "b"}}}));
    driver
        .write(key(ns, &id, 1, at), &v1, false)
        .await
        .expect("create generation 1");
    assert_eq!(driver.read(key(ns, &id, 1, at)).await.expect("read 1"), v1);
    assert!(
        matches!(
            driver.write(key(ns, &id, 1, at), &v2, false).await,
            Err(DriverError::Conflict(_))
        ),
        "a second generation 1 is a conflict"
    );
    assert_eq!(
        driver.read(key(ns, &id, 1, at)).await.expect("unchanged"),
        v1
    );
    driver
        .write(key(ns, &id, 2, at), &v2, true)
        .await
        .expect("generation 2");
    assert_eq!(driver.read(key(ns, &id, 2, at)).await.expect("read 2"), v2);
    driver
        .prune(ns, &id, at, Some(Generation::new(2).expect("2")))
        .await
        .expect("prune");
    assert_eq!(driver.read(key(ns, &id, 2, at)).await.expect("kept"), v2);
    driver.prune(ns, &id, at, None).await.expect("delete");
    assert!(
        matches!(
            driver.read(key(ns, &id, 2, at)).await,
            Err(DriverError::NotFound)
        ),
        "deleted documents are not found"
    );
    driver
        .prune(ns, &id, at, None)
        .await
        .expect("deleting again is fine");
}

async fn undo_restores_the_committed_generation(driver: &ConfigurationDriver, ns: &NamespaceId) {
    let id = ConfigurationId::generate();
    let at = Timestamp::now();
    let v1 = doc(json!({"n": 1}));
    let v2 = doc(json!({"n": 2}));
    driver
        .write(key(ns, &id, 1, at), &v1, false)
        .await
        .expect("create");
    let updated = driver
        .write(key(ns, &id, 2, at), &v2, true)
        .await
        .expect("update");
    driver
        .undo(key(ns, &id, 2, at), &updated)
        .await
        .expect("undo the update");
    assert_eq!(
        driver
            .read(key(ns, &id, 1, at))
            .await
            .expect("generation 1 again"),
        v1,
        "undoing an update leaves the committed generation readable"
    );
    driver.prune(ns, &id, at, None).await.expect("cleanup");
    // Each write is undone on its own (a create and its update never share a transaction).
    let created = driver
        .write(key(ns, &id, 1, at), &v1, false)
        .await
        .expect("create");
    driver
        .undo(key(ns, &id, 1, at), &created)
        .await
        .expect("undo the create");
    assert!(
        matches!(
            driver.read(key(ns, &id, 1, at)).await,
            Err(DriverError::NotFound)
        ),
        "undoing a create removes the document"
    );
}

async fn a_leftover_generation_is_replaced_only_when_asked(
    driver: &ConfigurationDriver,
    ns: &NamespaceId,
) {
    let id = ConfigurationId::generate();
    let at = Timestamp::now();
    driver
        .write(key(ns, &id, 1, at), &doc(json!({"n": 1})), false)
        .await
        .expect("create");
    // A write of generation 2 whose transaction never committed (and was never undone).
    driver
        .write(key(ns, &id, 2, at), &doc(json!({"n": 2})), true)
        .await
        .expect("leftover");
    // The next update of the committed generation 1 writes generation 2 again.
    let again = doc(json!({"n": 22}));
    driver
        .write(key(ns, &id, 2, at), &again, true)
        .await
        .expect("replace the leftover");
    assert_eq!(driver.read(key(ns, &id, 2, at)).await.expect("read"), again);
    driver.prune(ns, &id, at, None).await.expect("cleanup");
}

async fn oversized_documents_are_refused(driver: &ConfigurationDriver, ns: &NamespaceId) {
    let id = ConfigurationId::generate();
    let at = Timestamp::now();
    let big = doc(json!({"pad": "x".repeat(1024 * 1024)}));
    assert!(
        driver
            .write(key(ns, &id, 1, at), &big, false)
            .await
            .is_err(),
        "a document of 1 MiB or more is refused"
    );
    assert!(matches!(
        driver.read(key(ns, &id, 1, at)).await,
        Err(DriverError::NotFound)
    ));
}
