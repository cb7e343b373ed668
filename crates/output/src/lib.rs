//! longhaul-output: what longhaul writes and reads as files, for every face: PNG
//! charts (`chart`), results folders that hold one run's outputs (`folder`),
//! small input files read with a bound (`input`), and the static HTML site of the
//! studies' results (`site`, `longhaul report`).
//!
//! What is not here: what the charts and files say (the simulator's reports, the
//! emulator comparison's tables are theirs).

pub mod chart;
pub mod folder;
pub mod input;
pub mod site;
