//! A stack scenario's outside: none, a plain upstream router and an external client,
//! or a router that speaks BGP with every Node (`outside: {bgp: {}}`, issue 27).
use serde::Deserialize;

/// A scenario's outside: none, a plain router, or a router that speaks BGP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Outside {
    #[default]
    None,
    Router,
    Bgp,
}

impl Outside {
    /// Whether the scenario has an upstream router and a client at all.
    pub fn any(self) -> bool {
        self != Outside::None
    }
}

impl<'de> Deserialize<'de> for Outside {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Bgp {}
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct With {
            #[allow(dead_code)]
            bgp: Bgp,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Def {
            Plain(bool),
            With(With),
        }
        Ok(
            match Def::deserialize(d)
                .map_err(|_| serde::de::Error::custom("outside: write true, false or {bgp: {}}"))?
            {
                Def::Plain(true) => Outside::Router,
                Def::Plain(false) => Outside::None,
                Def::With(_) => Outside::Bgp,
            },
        )
    }
}
