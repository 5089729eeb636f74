//! The documented JSON schema, checked on real output: a document that drifts from
//! docs/schema/netarena-load.schema.json fails the test that produced it.

use serde_json::Value;

/// Panics, listing every violation, unless `doc` is valid against the schema.
pub fn validate_against_schema(doc: &Value) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/schema/netarena-load.schema.json"
    );
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("read the schema"))
            .expect("schema is JSON");
    let validator =
        jsonschema::draft202012::new(&schema).expect("the schema is a valid draft 2020-12 schema");
    let problems: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        problems.is_empty(),
        "output violates the schema:\n{}\n{doc:#}",
        problems.join("\n")
    );
}
