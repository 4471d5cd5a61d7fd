// engine/hang/fold_silence.h — one hang, one report: the ranks of a hung job
// stop writing records, so the liveness detector's `rank_silent` follows
// every hang a little later (--silent-after-s). While the job has a hang
// verdict, that silence is part of the hang's evidence, not a second
// diagnosis (and a second alert to operations).
#ifndef XPU_ENGINE_HANG_FOLD_SILENCE_H_
#define XPU_ENGINE_HANG_FOLD_SILENCE_H_

#include <vector>

#include "engine/state/diagnosis.h"

namespace xpu::engine::hang {

// `job_diagnoses`: one window's diagnoses of one job. When they hold a hang
// verdict (a hang_* diagnosis above info: a busy-wait that is not a fault
// yet does not count), every rank_silent among them is removed and its
// evidence appended to the hang's. Returns how many were folded.
int FoldSilenceIntoHang(std::vector<Diagnosis>* job_diagnoses);

}  // namespace xpu::engine::hang

#endif  // XPU_ENGINE_HANG_FOLD_SILENCE_H_
