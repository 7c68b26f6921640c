# 2026-12-02 14:24:08
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=pre,post,sandwich,deepnorm,rezero scheduler.warmup_steps=0,100 optim=adamw optim.lr=0.001,0.003,0.01 seed=0 protocol.stage=tune
# 2026-12-02 15:07:56
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=pre,post scheduler.warmup_steps=0,100 optim=muon optim.lr=0.001,0.003,0.01,0.03 seed=0 protocol.stage=tune
# 2026-12-02 15:31:46
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=pre,post,sandwich,deepnorm,rezero scheduler.warmup_steps=0,100 optim=adamw optim.lr=0.001,0.003,0.01,0.03 seed=0 protocol.stage=tune
# 2026-12-02 15:44:50
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=pre,post scheduler.warmup_steps=0,100 optim=muon optim.lr=0.001,0.003,0.01,0.03 seed=0 protocol.stage=tune
