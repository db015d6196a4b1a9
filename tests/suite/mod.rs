mod framing;
mod hygiene;
mod output;
mod overlap;
mod persistence;
mod restart;
mod timeouts;
mod validation;
