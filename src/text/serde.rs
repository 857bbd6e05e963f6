//! Serialises small value types as their display text (`"3x224x224"`, `"gpu:0"`) and reads them
//! back through `FromStr`, so configs, conditions and results files share one spelling.

macro_rules! serde_as_text {
    ($t:ty) => {
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <String as serde::Deserialize>::deserialize(d)?;
                text.parse().map_err(|_| {
                    serde::de::Error::custom(format!("invalid {} {text:?}", stringify!($t)))
                })
            }
        }
    };
}
