//! Engines (frameworks) that run models. Only the embedded tract engine exists so far.

pub mod tract;
