//! AI-use preferences: what a site says its content may be used for.

use std::fmt;
use std::str::FromStr;

/// A use a robot may declare for what it fetches. The names are those of
/// the Content Signals vocabulary (draft-romm-aipref-contentsignals); the
/// AIPREF labels (draft-ietf-aipref-vocab) map onto them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// `search`: building a search index and showing results that link to
    /// the content.
    Search,
    /// `ai-input`: giving the content to an AI model as it answers
    /// (retrieval-augmented generation, grounding).
    AiInput,
    /// `ai-train`: training or fine-tuning an AI model.
    AiTrain,
}

impl Purpose {
    /// Every purpose, in the order sets list them.
    pub const ALL: [Purpose; 3] = [Purpose::Search, Purpose::AiInput, Purpose::AiTrain];

    /// The name as written in `Content-Signal` and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Purpose::Search => "search",
            Purpose::AiInput => "ai-input",
            Purpose::AiTrain => "ai-train",
        }
    }

    /// The purpose called `name` (ASCII case ignored), if any.
    pub fn from_name(name: &str) -> Option<Purpose> {
        Purpose::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name))
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Purpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of [`Purpose`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Purposes(u8);

impl Purposes {
    /// No purpose: a usage check with it never refuses.
    pub const NONE: Purposes = Purposes(0);

    /// Every purpose.
    pub const ALL: Purposes = Purposes(0b111);

    /// Is `purpose` in the set?
    pub fn contains(self, purpose: Purpose) -> bool {
        self.0 & purpose.bit() != 0
    }

    /// The set with `purpose` added.
    #[must_use]
    pub fn with(self, purpose: Purpose) -> Purposes {
        Purposes(self.0 | purpose.bit())
    }

    /// The purposes in either set.
    #[must_use]
    pub fn union(self, other: Purposes) -> Purposes {
        Purposes(self.0 | other.0)
    }

    /// Is the set empty?
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The purposes in the set, in [`Purpose::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Purpose> {
        Purpose::ALL.into_iter().filter(move |p| self.contains(*p))
    }
}

impl FromIterator<Purpose> for Purposes {
    fn from_iter<I: IntoIterator<Item = Purpose>>(iter: I) -> Purposes {
        iter.into_iter().fold(Purposes::NONE, Purposes::with)
    }
}

impl fmt::Display for Purposes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, purpose) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(purpose.name())?;
        }
        Ok(())
    }
}

/// A name in a purpose list that is no [`Purpose`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPurpose {
    /// The name as given.
    pub name: String,
}

impl fmt::Display for UnknownPurpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown purpose `{}`; expected any of {}",
            self.name,
            Purposes::ALL
        )
    }
}

impl std::error::Error for UnknownPurpose {}

impl FromStr for Purposes {
    type Err = UnknownPurpose;

    /// Reads a comma-separated list (`ai-train, ai-input`); blanks around
    /// names and empty items are skipped, so `""` is [`Purposes::NONE`].
    fn from_str(list: &str) -> Result<Purposes, UnknownPurpose> {
        list.split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map(|name| {
                Purpose::from_name(name).ok_or_else(|| UnknownPurpose {
                    name: name.to_owned(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ext_purpose_names_round_trip() {
        for purpose in Purpose::ALL {
            assert_eq!(Purpose::from_name(purpose.name()), Some(purpose));
        }
        assert_eq!(Purpose::from_name("AI-Train"), Some(Purpose::AiTrain));
        assert_eq!(Purpose::from_name("train-ai"), None);
    }

    #[test]
    fn ext_purpose_sets() {
        let set = Purposes::NONE.with(Purpose::AiTrain).with(Purpose::Search);
        assert!(set.contains(Purpose::Search) && !set.contains(Purpose::AiInput));
        assert_eq!(set.to_string(), "search, ai-train");
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            [Purpose::Search, Purpose::AiTrain]
        );
        assert_eq!(
            Purpose::ALL.into_iter().collect::<Purposes>(),
            Purposes::ALL
        );
        assert_eq!(Purposes::ALL.to_string(), "search, ai-input, ai-train");
        assert!(Purposes::NONE.is_empty() && Purposes::NONE.to_string().is_empty());
        assert_eq!(
            set.union(Purposes::NONE.with(Purpose::AiInput)),
            Purposes::ALL
        );
    }

    #[test]
    fn ext_purpose_lists_parse() {
        assert_eq!("".parse(), Ok(Purposes::NONE));
        assert_eq!(
            " ai-train , ai-input,".parse(),
            Ok(Purposes::NONE.with(Purpose::AiTrain).with(Purpose::AiInput))
        );
        let error = "search,train-ai".parse::<Purposes>().unwrap_err();
        assert_eq!(error.name, "train-ai");
        assert_eq!(
            error.to_string(),
            "unknown purpose `train-ai`; expected any of search, ai-input, ai-train"
        );
    }
}
