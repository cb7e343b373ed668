//! Links as a scenario writes them: rate, delay, queue (`"1bdp"`, `"100pkts"`,
//! `"1MB"`) and loss (a probability or a Gilbert-Elliott table), checked and turned
//! into [`LinkSpec`]s; times and probabilities with the
//! key named when refused.

use crate::topology::{LinkSpec, QueueSpec};
use longhaul_model::loss::LossModel;
use longhaul_model::units::{parse_queue, parse_rate, parse_time};
use longhaul_proto::Duration;

use super::schema::{LinkFile, LossFile, LossTable};
use super::{Loader, ScenarioError};

impl Loader<'_> {
    pub(super) fn loss(&self, key: &str, l: &Option<LossFile>) -> Result<LossModel, ScenarioError> {
        Ok(match l {
            None => LossModel::None,
            Some(LossFile::Bernoulli(p)) | Some(LossFile::Table(LossTable::Bernoulli { p })) => {
                match self.prob(key, *p)? {
                    0.0 => LossModel::None,
                    p => LossModel::Bernoulli { p },
                }
            }
            Some(LossFile::Table(LossTable::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_good,
                loss_bad,
            })) => LossModel::GilbertElliott {
                p_good_to_bad: self.prob(&format!("{key}.p_good_to_bad"), *p_good_to_bad)?,
                p_bad_to_good: self.prob(&format!("{key}.p_bad_to_good"), *p_bad_to_good)?,
                loss_good: self.prob(&format!("{key}.loss_good"), loss_good.unwrap_or(0.0))?,
                loss_bad: self.prob(&format!("{key}.loss_bad"), loss_bad.unwrap_or(1.0))?,
            },
        })
    }

    pub(super) fn link(&self, key: &str, l: &LinkFile) -> Result<LinkSpec, ScenarioError> {
        let rate = parse_rate(&l.rate).map_err(|m| self.err(format!("{key}.rate"), m))?;
        let delay = self.time(&format!("{key}.delay"), &l.delay)?;
        let queue = match &l.queue {
            None => QueueSpec::Bdp(1.0),
            Some(q) => parse_queue(q).map_err(|m| self.err(format!("{key}.queue"), m))?,
        };
        let egress = match &l.egress {
            None => None,
            Some(e) => Some(self.egress(&format!("{key}.egress"), e)?),
        };
        Ok(LinkSpec {
            rate,
            delay,
            queue,
            loss: self.loss(&format!("{key}.loss"), &l.loss)?,
            loss_reverse: self.loss(&format!("{key}.loss_reverse"), &l.loss_reverse)?,
            egress,
            wireless: l.wireless,
        })
    }

    pub(super) fn time(&self, key: &str, s: &str) -> Result<Duration, ScenarioError> {
        parse_time(s).map_err(|m| self.err(key, m))
    }

    pub(super) fn prob(&self, key: &str, p: f64) -> Result<f64, ScenarioError> {
        if (0.0..=1.0).contains(&p) {
            Ok(p)
        } else {
            Err(self.err(
                key,
                format!("{p} is not a probability: use a number from 0 to 1"),
            ))
        }
    }
}
