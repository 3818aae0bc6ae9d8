//! The two macros every module that owns boundary codes declares them with
//! (`codes!` for constants, `coded_enum!` for enums): each code is written
//! once, with its name, and listed for `crate::vocab`, which gathers the lists.
//! Apart from `vocab` so that the owners do not depend on the module that
//! depends on them.

/// Declares `pub const NAME: $t = value;` for each entry, and `NAMED`: every
/// one of them as `(name, value)`, in declaration order (what [`vocabulary`]
/// exports). Constants declared outside the macro (masks, derived bits) stay
/// out of `NAMED`.
macro_rules! codes {
    ($t:ty; $( $(#[$meta:meta])* $name:ident = $value:expr; )*) => {
        $( $(#[$meta])* pub const $name: $t = $value; )*
        /// Every code above with its name, in declaration order (`crate::vocab`).
        pub const NAMED: &[(&str, $t)] = &[$( (stringify!($name), $name), )*];
    };
}
pub(crate) use codes;

/// Declares a `#[repr(u8)]` enum whose variants carry explicit codes, with
/// `VARIANTS` (every variant and its name, in declaration order) and
/// `from_u8` (the variant of a code, if any).
macro_rules! coded_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $code:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[repr(u8)]
        pub enum $name {
            $( $(#[$vmeta])* $variant = $code, )*
        }

        impl $name {
            /// Every variant with its name, in declaration order (`crate::vocab`).
            pub const VARIANTS: &'static [(&'static str, Self)] =
                &[$( (stringify!($variant), Self::$variant), )*];

            /// The variant whose code is `code`, if any.
            pub fn from_u8(code: u8) -> Option<Self> {
                match code {
                    $( $code => Some(Self::$variant), )*
                    _ => None,
                }
            }
        }
    };
}
pub(crate) use coded_enum;
