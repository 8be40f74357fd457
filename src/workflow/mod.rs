//! What the daemons and the operator commands both do, across the store and the broker, so
//! that a command never reaches into a daemon and `bus` and `store` each keep to their side:
//!
//! - [`ledger`]: log lines mined into templates, and the template, merge and hit rows waiting
//!   to be stored (the logminer and `tayga remine`);
//! - [`alerts`]: a stored alert published and marked as acknowledged (the logminer and
//!   `tayga alerts republish`);
//! - [`retry`]: the operator's manual retry of a failed delivery (`tayga deliveries retry`
//!   and the API's retry endpoint).

pub mod alerts;
pub mod ledger;
pub mod retry;
