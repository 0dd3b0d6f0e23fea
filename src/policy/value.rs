//! Rust values (the mesh model) as policy values, built directly: going through JSON
//! text costs the text, and a second string for every key and value of it. The
//! result is what `serde_json` would write and regorus read back.

use regorus::Value;
use serde::ser::{self, Serialize};
use std::collections::BTreeMap;

#[derive(Debug)]
pub(crate) struct Unsupported(String);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unsupported {}

impl ser::Error for Unsupported {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Unsupported(msg.to_string())
    }
}

/// Strings already made into policy values: object keys (`metadata`, `name`,
/// `spec`…) and short values (kinds, namespaces, label values) repeat across
/// thousands of objects and share one allocation.
#[derive(Default)]
pub(crate) struct Strings(std::collections::HashMap<String, Value, foldhash::fast::RandomState>);

impl Strings {
    /// Longer strings (resource ids, file paths, images, annotations) are seldom
    /// repeated: looking them up and keeping a second copy as the key cost more than
    /// sharing saves (at 100k resources, 4 % of the check's CPU with 64 here, for
    /// 10 MiB less at the peak).
    const SHARED_UP_TO: usize = 24;

    pub(crate) fn value(&mut self, s: &str) -> Value {
        if s.len() > Self::SHARED_UP_TO {
            return Value::from(s);
        }
        if let Some(v) = self.0.get(s) {
            return v.clone();
        }
        let v = Value::from(s);
        self.0.insert(s.to_string(), v.clone());
        v
    }
}

/// `value` as a policy value; None where `serde_json` could not write it either
/// (a map key that is not a string or a number).
pub(crate) fn to_value<T: Serialize + ?Sized>(value: &T) -> Option<Value> {
    to_value_sharing(value, &mut Strings::default())
}

/// As [`to_value`], sharing strings with the values built before it.
pub(crate) fn to_value_sharing<T: Serialize + ?Sized>(
    value: &T,
    strings: &mut Strings,
) -> Option<Value> {
    value.serialize(Builder(strings, Vec::new())).ok()
}

/// As [`to_value_sharing`], with the named fields of the outermost struct given
/// instead of built (values the caller could share with another model's).
pub(crate) fn to_value_given<T: Serialize + ?Sized>(
    value: &T,
    strings: &mut Strings,
    given: Vec<(&'static str, Value)>,
) -> Option<Value> {
    value.serialize(Builder(strings, given)).ok()
}

/// Builds a value; the fields of `.1` are those of the struct it builds, given.
struct Builder<'a>(&'a mut Strings, Vec<(&'static str, Value)>);

type Result<T> = std::result::Result<T, Unsupported>;

impl<'a> ser::Serializer for Builder<'a> {
    type Ok = Value;
    type Error = Unsupported;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Seq<'a>;
    type SerializeTupleStruct = Seq<'a>;
    type SerializeTupleVariant = Variant<Seq<'a>>;
    type SerializeMap = Map<'a>;
    type SerializeStruct = Map<'a>;
    type SerializeStructVariant = Variant<Map<'a>>;

    fn serialize_bool(self, v: bool) -> Result<Value> {
        Ok(Value::Bool(v))
    }
    fn serialize_i8(self, v: i8) -> Result<Value> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i16(self, v: i16) -> Result<Value> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i32(self, v: i32) -> Result<Value> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i64(self, v: i64) -> Result<Value> {
        // JSON text of a non-negative integer reads back as unsigned.
        Ok(match u64::try_from(v) {
            Ok(u) => Value::from(u),
            Err(_) => Value::from(v),
        })
    }
    fn serialize_u8(self, v: u8) -> Result<Value> {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u16(self, v: u16) -> Result<Value> {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u32(self, v: u32) -> Result<Value> {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u64(self, v: u64) -> Result<Value> {
        Ok(Value::from(v))
    }
    fn serialize_f32(self, v: f32) -> Result<Value> {
        self.serialize_f64(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<Value> {
        // serde_json writes what JSON cannot hold as null.
        Ok(if v.is_finite() {
            Value::from(v)
        } else {
            Value::Null
        })
    }
    fn serialize_char(self, v: char) -> Result<Value> {
        Ok(self.0.value(v.encode_utf8(&mut [0; 4])))
    }
    fn serialize_str(self, v: &str) -> Result<Value> {
        Ok(self.0.value(v))
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<Value> {
        Ok(Value::from(
            v.iter()
                .map(|b| Value::from(u64::from(*b)))
                .collect::<Vec<_>>(),
        ))
    }
    fn serialize_none(self) -> Result<Value> {
        Ok(Value::Null)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Value> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<Value> {
        Ok(Value::Null)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<Value> {
        Ok(Value::Null)
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<Value> {
        Ok(self.0.value(variant))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<Value> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Value> {
        let key = self.0.value(variant);
        let inner = value.serialize(Builder(&mut *self.0, Vec::new()))?;
        Ok(Value::from(BTreeMap::from([(key, inner)])))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Seq<'a>> {
        Ok(Seq {
            strings: self.0,
            items: Vec::with_capacity(len.unwrap_or(0)),
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq<'a>> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Seq<'a>> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Variant<Seq<'a>>> {
        let key = self.0.value(variant);
        Ok(Variant {
            key,
            inner: self.serialize_seq(Some(len))?,
        })
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Map<'a>> {
        Ok(Map {
            strings: self.0,
            fields: BTreeMap::new(),
            key: None,
            given: self.1,
        })
    }
    fn serialize_struct(self, _: &'static str, len: usize) -> Result<Map<'a>> {
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Variant<Map<'a>>> {
        let key = self.0.value(variant);
        Ok(Variant {
            key,
            inner: self.serialize_map(Some(len))?,
        })
    }
}

pub(crate) struct Seq<'a> {
    strings: &'a mut Strings,
    items: Vec<Value>,
}

impl Seq<'_> {
    fn push<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let v = value.serialize(Builder(&mut *self.strings, Vec::new()))?;
        self.items.push(v);
        Ok(())
    }
}

impl ser::SerializeSeq for Seq<'_> {
    type Ok = Value;
    type Error = Unsupported;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.push(value)
    }
    fn end(self) -> Result<Value> {
        Ok(Value::from(self.items))
    }
}

impl ser::SerializeTuple for Seq<'_> {
    type Ok = Value;
    type Error = Unsupported;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.push(value)
    }
    fn end(self) -> Result<Value> {
        Ok(Value::from(self.items))
    }
}

impl ser::SerializeTupleStruct for Seq<'_> {
    type Ok = Value;
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.push(value)
    }
    fn end(self) -> Result<Value> {
        Ok(Value::from(self.items))
    }
}

pub(crate) struct Map<'a> {
    strings: &'a mut Strings,
    fields: BTreeMap<Value, Value>,
    key: Option<Value>,
    /// Fields given, not built (a struct's only).
    given: Vec<(&'static str, Value)>,
}

impl Map<'_> {
    fn insert<T: Serialize + ?Sized>(&mut self, key: Value, value: &T) -> Result<()> {
        let v = value.serialize(Builder(&mut *self.strings, Vec::new()))?;
        self.fields.insert(key, v);
        Ok(())
    }
}

impl ser::SerializeMap for Map<'_> {
    type Ok = Value;
    type Error = Unsupported;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        // JSON object keys are strings: numbers become their text, as serde_json does.
        let key = match key.serialize(Builder(&mut *self.strings, Vec::new()))? {
            k @ Value::String(_) => k,
            _ => match serde_json::to_value(key).map_err(ser::Error::custom)? {
                serde_json::Value::String(s) => self.strings.value(&s),
                serde_json::Value::Number(n) => self.strings.value(&n.to_string()),
                serde_json::Value::Bool(b) => self.strings.value(if b { "true" } else { "false" }),
                _ => return Err(Unsupported("a map key that is not a string".into())),
            },
        };
        self.key = Some(key);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let key = self
            .key
            .take()
            .ok_or_else(|| Unsupported("a map value without its key".into()))?;
        self.insert(key, value)
    }
    fn end(self) -> Result<Value> {
        Ok(Value::from(self.fields))
    }
}

impl ser::SerializeStruct for Map<'_> {
    type Ok = Value;
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<()> {
        if let Some(at) = self.given.iter().position(|(k, _)| *k == key) {
            let (_, given) = self.given.swap_remove(at);
            let key = self.strings.value(key);
            self.fields.insert(key, given);
            return Ok(());
        }
        let key = self.strings.value(key);
        self.insert(key, value)
    }
    fn end(self) -> Result<Value> {
        Ok(Value::from(self.fields))
    }
}

/// An enum variant with fields: `{variant: fields}`, as serde_json writes it.
pub(crate) struct Variant<T> {
    key: Value,
    inner: T,
}

impl ser::SerializeTupleVariant for Variant<Seq<'_>> {
    type Ok = Value;
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.inner.push(value)
    }
    fn end(self) -> Result<Value> {
        let inner = Value::from(self.inner.items);
        Ok(Value::from(BTreeMap::from([(self.key, inner)])))
    }
}

impl ser::SerializeStructVariant for Variant<Map<'_>> {
    type Ok = Value;
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<()> {
        let key = self.inner.strings.value(key);
        self.inner.insert(key, value)
    }
    fn end(self) -> Result<Value> {
        let inner = Value::from(self.inner.fields);
        Ok(Value::from(BTreeMap::from([(self.key, inner)])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;

    #[derive(Serialize)]
    enum Shape {
        Point,
        Circle(f64),
        Pair(u8, i32),
        Box { w: u32, h: Option<u32> },
    }

    #[derive(Serialize)]
    struct Sample {
        name: String,
        count: i64,
        negative: i64,
        ratio: f64,
        missing: Option<String>,
        tags: Vec<&'static str>,
        by_port: BTreeMap<u16, String>,
        by_name: BTreeMap<String, bool>,
        shapes: Vec<Shape>,
        #[serde(skip)]
        _hidden: u8,
        #[serde(rename = "renamedField")]
        renamed: char,
    }

    #[test]
    fn a_model_value_is_what_its_json_text_reads_back_as() {
        let sample = Sample {
            name: "web".into(),
            count: 3,
            negative: -2,
            ratio: 0.25,
            missing: None,
            tags: vec!["a", "b", "a"],
            by_port: BTreeMap::from([(80, "http".into()), (443, "https".into())]),
            by_name: BTreeMap::from([("x".into(), true)]),
            shapes: vec![
                Shape::Point,
                Shape::Circle(1.5),
                Shape::Pair(1, -1),
                Shape::Box { w: 2, h: None },
            ],
            _hidden: 7,
            renamed: 'z',
        };
        let text = serde_json::to_string(&sample).expect("json");
        let through_text = Value::from_json_str(&text).expect("value");
        assert_eq!(to_value(&sample), Some(through_text));
    }
}
