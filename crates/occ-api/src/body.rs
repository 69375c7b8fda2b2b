//! One definition per request body.
//!
//! A body is declared once with [`request_body!`]: its JSON fields in order, whether each is
//! required, optional, nullable or a patch, and the type of its value. The declaration yields the
//! typed body, its parser and its OpenAPI schema, so the served document cannot drift from what
//! the API accepts. Each value type implements [`Field`]: how a present value is read and how it
//! is documented, side by side.
//!
//! Parsing collects every problem — unknown fields (every body is a closed object), missing
//! fields, wrong types, bad values — with its JSON pointer into one 400 (at most 32 details).
//! Messages name pointers and expectations, never values.

use occ_core::Error;
use occ_core::validate::Problems;
use serde_json::Value;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{
    AdditionalProperties, AnyOfBuilder, ArrayBuilder, ArrayItems, ObjectBuilder, Schema, Type,
};

pub use occ_core::validate::Fields;

/// A value a body field can hold. `Cx` is what its rules need besides the value — the
/// Namespace of the path for Secret references — or `()`.
pub trait Field<Cx = ()>: Sized {
    /// Reads a present value at `path`, recording every problem. Returns `None` only after
    /// recording one.
    fn parse(value: &Value, path: &str, cx: &Cx, problems: &mut Problems) -> Option<Self>;

    /// The JSON Schema of a present value.
    fn schema() -> Schema;
}

/// Parses a whole request body: the value only when nothing at all was wrong.
pub fn parse<Cx, T: Field<Cx>>(body: &Value, cx: &Cx) -> Result<T, Error> {
    let mut problems = Problems::new();
    match T::parse(body, "", cx, &mut problems) {
        Some(value) if problems.is_empty() => Ok(value),
        // Field::parse promises a problem with every `None`; a parser that breaks it is a bug,
        // reported as one rather than as the caller's mistake.
        None if problems.is_empty() => Err(Error::internal(format!(
            "the {} parser produced no value and recorded no problem",
            std::any::type_name::<T>()
        ))),
        _ => Err(problems.into_error()),
    }
}

/// Whether a field must be present and what `null` means there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// Must be present (`REQUIRED` when absent).
    Required,
    /// May be omitted; `null` is not one of its values.
    Optional,
    /// May be omitted; `null` means the same as omitted.
    Nullable,
    /// Omitted keeps the current value, `null` clears it.
    Patch,
}

/// Reads a required field (`REQUIRED` when absent; `None` after a problem).
pub fn take_required<Cx, T: Field<Cx>>(
    fields: &mut Fields<'_>,
    key: &'static str,
    cx: &Cx,
    problems: &mut Problems,
) -> Option<T> {
    let path = fields.path_of(key);
    fields
        .required(key, problems)
        .and_then(|v| T::parse(v, &path, cx, problems))
}

/// Reads a field that may be omitted: `absent` when it is, `null` for JSON `null` when the rule
/// gives `null` a meaning (else `null` goes to the value's own rules, usually a type error), the
/// parsed value through `present` otherwise; `None` after a problem.
pub fn take_omissible<Cx, T: Field<Cx>, S>(
    fields: &mut Fields<'_>,
    key: &'static str,
    cx: &Cx,
    problems: &mut Problems,
    absent: S,
    null: Option<S>,
    present: fn(T) -> S,
) -> Option<S> {
    match fields.optional(key) {
        None => Some(absent),
        Some(Value::Null) if null.is_some() => null,
        Some(v) => T::parse(v, &fields.path_of(key), cx, problems).map(present),
    }
}

/// One documented property of a body.
pub struct Property {
    /// The JSON name.
    pub name: &'static str,
    /// The declaration's doc comment.
    pub doc: &'static str,
    /// Required, optional, nullable or patch.
    pub presence: Presence,
    /// The schema of a present, non-null value.
    pub schema: Schema,
}

/// Doc-comment lines (`#[doc]` attributes joined by newlines) as one description.
fn doc_text(doc: &str) -> Option<String> {
    let text = doc.lines().map(str::trim).collect::<Vec<_>>().join("\n");
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// Sets a schema's description.
fn describe(mut schema: Schema, doc: &str) -> Schema {
    let Some(text) = doc_text(doc) else {
        return schema;
    };
    match &mut schema {
        Schema::Object(s) => s.description = Some(text),
        Schema::Array(s) => s.description = Some(text),
        Schema::AnyOf(s) => s.description = Some(text),
        Schema::OneOf(s) => s.description = Some(text),
        Schema::AllOf(s) => s.description = Some(text),
        // utoipa may add variants; the bodies use none other
        _ => {}
    }
    schema
}

/// `schema` or `null` (an `anyOf` gains a `null` alternative rather than being nested).
fn or_null(schema: Schema) -> Schema {
    let null = ObjectBuilder::new().schema_type(Type::Null).build();
    match schema {
        Schema::AnyOf(mut any) => {
            any.items.push(RefOr::T(Schema::Object(null)));
            Schema::AnyOf(any)
        }
        other => Schema::AnyOf(AnyOfBuilder::new().item(other).item(null).build()),
    }
}

/// The schema of a closed object with these properties (the body declarations' schema). The
/// title names the object for client generators, which otherwise number nested shapes.
pub fn object_schema(title: &str, doc: &str, properties: Vec<Property>) -> Schema {
    let mut object = ObjectBuilder::new()
        .schema_type(Type::Object)
        .title((!title.is_empty()).then_some(title))
        .description(doc_text(doc))
        .additional_properties(Some(AdditionalProperties::<Schema>::FreeForm(false)));
    for p in properties {
        let schema = match p.presence {
            Presence::Required | Presence::Optional => p.schema,
            Presence::Nullable | Presence::Patch => or_null(p.schema),
        };
        object = object.property(p.name, describe(schema, p.doc));
        if p.presence == Presence::Required {
            object = object.required(p.name);
        }
    }
    Schema::Object(object.build())
}

/// A string schema with optional length bounds (in characters) and pattern.
pub fn string_schema(min: Option<usize>, max: Option<usize>, pattern: Option<&str>) -> Schema {
    Schema::Object(
        ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(min)
            .max_length(max)
            .pattern(pattern)
            .build(),
    )
}

/// A string schema that accepts exactly these values.
pub fn enum_schema<'a>(values: impl IntoIterator<Item = &'a str>) -> Schema {
    Schema::Object(
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(values))
            .build(),
    )
}

/// An array schema of `items` with bounds.
pub fn array_schema(items: Schema, min: usize, max: usize) -> Schema {
    Schema::Array(
        ArrayBuilder::new()
            .items(ArrayItems::RefOrSchema(Box::new(RefOr::T(items))))
            .min_items(Some(min))
            .max_items(Some(max))
            .build(),
    )
}

/// Declares a request body once: the struct, its [`Field`] parser and its OpenAPI schema.
///
/// ```text
/// request_body! {
///     /// `POST /namespaces/{namespaceId}/agents`.
///     pub struct AgentCreateBody in NamespaceId {
///         /// Unique per Namespace.
///         required "name" => name: Name,
///         /// `embedded` (default) | `dedicated`.
///         optional "executionMode" => execution_mode: ExecutionMode,
///     }
/// }
/// ```
///
/// Presence is one of `required`, `optional`, `nullable` or `patch` (see [`Presence`]); fields
/// are read, and their problems reported, in the declared order, then unknown fields. `in Cx`
/// names the context the fields' rules need (`()` when omitted); `parse` takes it.
macro_rules! request_body {
    // the presence rules: the field's type in the body, how it is read, how it is documented
    (@slot required $ty:ty) => { $ty };
    (@slot optional $ty:ty) => { Option<$ty> };
    (@slot nullable $ty:ty) => { Option<$ty> };
    (@slot patch $ty:ty) => { occ_controller::agents::Patch<$ty> };
    (@take required $ty:ty, $($arg:expr),+) => {
        $crate::body::take_required::<_, $ty>($($arg),+)
    };
    (@take optional $ty:ty, $($arg:expr),+) => {
        $crate::body::take_omissible::<_, $ty, _>($($arg),+, None, None, Some)
    };
    (@take nullable $ty:ty, $($arg:expr),+) => {
        $crate::body::take_omissible::<_, $ty, _>($($arg),+, None, Some(None), Some)
    };
    (@take patch $ty:ty, $($arg:expr),+) => {{
        use occ_controller::agents::Patch;
        $crate::body::take_omissible::<_, $ty, _>($($arg),+, Patch::Keep, Some(Patch::Clear), Patch::Set)
    }};
    (@presence required) => { $crate::body::Presence::Required };
    (@presence optional) => { $crate::body::Presence::Optional };
    (@presence nullable) => { $crate::body::Presence::Nullable };
    (@presence patch) => { $crate::body::Presence::Patch };
    (
        $(#[doc = $doc:literal])*
        pub struct $name:ident in $cx:ty { $($fields:tt)* }
    ) => {
        $crate::body::request_body!(@define [$($doc)*] $name [$cx] $($fields)*);

        impl $name {
            /// Parses the whole body: every problem, with its JSON pointer, in one 400.
            pub fn parse(body: &serde_json::Value, cx: &$cx) -> Result<Self, occ_core::Error> {
                $crate::body::parse(body, cx)
            }
        }
    };
    (
        $(#[doc = $doc:literal])*
        pub struct $name:ident { $($fields:tt)* }
    ) => {
        $crate::body::request_body!(@define [$($doc)*] $name [()] $($fields)*);

        impl $name {
            /// Parses the whole body: every problem, with its JSON pointer, in one 400.
            pub fn parse(body: &serde_json::Value) -> Result<Self, occ_core::Error> {
                $crate::body::parse(body, &())
            }
        }
    };
    (
        @define [$($doc:literal)*] $name:ident [$cx:ty]
        $(
            $(#[doc = $field_doc:literal])*
            $presence:ident $json:literal => $field:ident: $ty:ty
        ),* $(,)?
    ) => {
        $(#[doc = $doc])*
        pub struct $name {
            $(
                $(#[doc = $field_doc])*
                pub $field: $crate::body::request_body!(@slot $presence $ty),
            )*
        }

        impl $crate::body::Field<$cx> for $name {
            fn parse(
                value: &serde_json::Value,
                path: &str,
                cx: &$cx,
                problems: &mut occ_core::validate::Problems,
            ) -> Option<Self> {
                #[allow(unused_mut)] // a body without fields (`{}`) reads nothing
                let mut fields = $crate::body::Fields::new(value, path, problems);
                let _ = cx;
                $(
                    let $field = $crate::body::request_body!(
                        @take $presence $ty, &mut fields, $json, cx, problems
                    );
                )*
                fields.finish(problems);
                Some(Self { $($field: $field?,)* })
            }

            fn schema() -> utoipa::openapi::schema::Schema {
                $crate::body::object_schema(
                    stringify!($name),
                    concat!($($doc, "\n"),*),
                    vec![$(
                        $crate::body::Property {
                            name: $json,
                            doc: concat!($($field_doc, "\n"),*),
                            presence: $crate::body::request_body!(@presence $presence),
                            schema: <$ty as $crate::body::Field<$cx>>::schema(),
                        },
                    )*],
                )
            }
        }

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::RefOr::T(<Self as $crate::body::Field<$cx>>::schema())
            }
        }

        impl utoipa::ToSchema for $name {
            fn name() -> std::borrow::Cow<'static, str> {
                std::borrow::Cow::Borrowed(stringify!($name))
            }
        }
    };
}

pub(crate) use request_body;
