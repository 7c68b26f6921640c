# 2026-12-02 14:24:08
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=pre,post,sandwich,deepnorm,rezero scheduler.warmup_steps=0,100 optim=adamw optim.lr=0.001,0.003,0.01 seed=0 protocol.stage=tune
# 2026-12-02 15:07:56
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=pre,post scheduler.warmup_steps=0,100 optim=muon optim.lr=0.001,0.003,0.01,0.03 seed=0 protocol.stage=tune
# 2026-12-02 15:31:46
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=pre,post,sandwich,deepnorm,rezero scheduler.warmup_steps=0,100 optim=adamw optim.lr=0.001,0.003,0.01,0.03 seed=0 protocol.stage=tune
# 2026-12-02 15:44:50
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=pre,post scheduler.warmup_steps=0,100 optim=muon optim.lr=0.001,0.003,0.01,0.03 seed=0 protocol.stage=tune
# 2026-12-02 18:24:58
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=pre,post,sandwich,deepnorm,rezero scheduler.warmup_steps=0,100 optim=adamw optim.lr=0.001,0.003,0.01,0.03 seed=0 protocol.stage=tune
# 2026-12-02 18:32:16
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 'protocol.tune={optim.lr:[1.0e-3,3.0e-3,1.0e-2,3.0e-2,1.0e-1]}' model.norm_placement=pre,post scheduler.warmup_steps=0,100 optim=muon optim.lr=0.001,0.003,0.01,0.03,0.1 seed=0 protocol.stage=tune
# 2026-12-02 18:42:19
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=pre,post,sandwich,deepnorm,rezero scheduler.warmup_steps=0,100 optim=adamw optim.lr=0.001,0.003,0.01,0.03 seed=0 protocol.stage=tune
# 2026-12-02 18:43:24
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 'protocol.tune={optim.lr:[1.0e-3,3.0e-3,1.0e-2,3.0e-2,1.0e-1]}' 'hydra.job.config.override_dirname.exclude_keys=[experiment,protocol.tune]' model.norm_placement=pre,post scheduler.warmup_steps=0,100 optim=muon optim.lr=0.001,0.003,0.01,0.03,0.1 seed=0 protocol.stage=tune
# 2026-12-02 18:44:11
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=pre scheduler.warmup_steps=0 optim=adamw optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-02 18:44:41
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=pre scheduler.warmup_steps=100 optim=adamw optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-02 18:45:09
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=post scheduler.warmup_steps=0 optim=adamw optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-02 18:45:38
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=post scheduler.warmup_steps=100 optim=adamw optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-02 18:46:10
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=sandwich scheduler.warmup_steps=0 optim=adamw optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-02 18:46:41
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=sandwich scheduler.warmup_steps=100 optim=adamw optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-02 18:47:11
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=deepnorm scheduler.warmup_steps=0 optim=adamw optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-02 18:54:03
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=deepnorm scheduler.warmup_steps=100 optim=adamw optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-02 18:58:39
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=pre,post,sandwich,deepnorm,rezero scheduler.warmup_steps=0,100 optim=adamw optim.lr=0.001,0.003,0.01,0.03 seed=0 protocol.stage=tune
# 2026-12-02 18:59:27
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 'protocol.tune={optim.lr:[1.0e-3,3.0e-3,1.0e-2,3.0e-2,1.0e-1]}' 'hydra.job.config.override_dirname.exclude_keys=[experiment,protocol.tune]' model.norm_placement=pre,post scheduler.warmup_steps=0,100 optim=muon optim.lr=0.001,0.003,0.01,0.03,0.1 seed=0 protocol.stage=tune
# 2026-12-02 19:21:27
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=pre scheduler.warmup_steps=0 optim=adamw optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-02 19:34:30
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=pre scheduler.warmup_steps=100 optim=adamw optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-02 19:46:36
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=post scheduler.warmup_steps=0 optim=adamw optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-02 19:58:17
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=post scheduler.warmup_steps=100 optim=adamw optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-02 20:09:54
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=sandwich scheduler.warmup_steps=0 optim=adamw optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-02 20:22:18
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=sandwich scheduler.warmup_steps=100 optim=adamw optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-02 20:34:50
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=deepnorm scheduler.warmup_steps=0 optim=adamw optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-02 20:43:34
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=deepnorm scheduler.warmup_steps=100 optim=adamw optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-02 20:56:01
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=rezero scheduler.warmup_steps=0 optim=adamw optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-02 21:07:54
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=rezero scheduler.warmup_steps=100 optim=adamw optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-02 21:20:37
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 'protocol.tune={optim.lr:[1.0e-3,3.0e-3,1.0e-2,3.0e-2,1.0e-1]}' 'hydra.job.config.override_dirname.exclude_keys=[experiment,protocol.tune]' model.norm_placement=pre scheduler.warmup_steps=0 optim=muon optim.lr=0.03 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-02 21:45:55
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 'protocol.tune={optim.lr:[1.0e-3,3.0e-3,1.0e-2,3.0e-2,1.0e-1]}' 'hydra.job.config.override_dirname.exclude_keys=[experiment,protocol.tune]' model.norm_placement=pre scheduler.warmup_steps=100 optim=muon optim.lr=0.03 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 08:39:13
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=pre,post,sandwich,deepnorm,rezero scheduler.warmup_steps=0,100 optim=adamw optim.lr=0.001,0.003,0.01,0.03 seed=0 protocol.stage=tune
# 2026-12-03 08:39:43
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 'protocol.tune={optim.lr:[1.0e-3,3.0e-3,1.0e-2,3.0e-2,1.0e-1]}' 'hydra.job.config.override_dirname.exclude_keys=[experiment,protocol.tune]' model.norm_placement=pre,post scheduler.warmup_steps=0,100 optim=muon optim.lr=0.001,0.003,0.01,0.03,0.1 seed=0 protocol.stage=tune
# 2026-12-03 08:40:11
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=pre scheduler.warmup_steps=0 optim=adamw optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 08:40:28
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=pre scheduler.warmup_steps=100 optim=adamw optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 08:40:43
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=post scheduler.warmup_steps=0 optim=adamw optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 08:40:58
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=post scheduler.warmup_steps=100 optim=adamw optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 08:41:13
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=sandwich scheduler.warmup_steps=0 optim=adamw optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 08:41:28
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=sandwich scheduler.warmup_steps=100 optim=adamw optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 08:41:42
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=deepnorm scheduler.warmup_steps=0 optim=adamw optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 08:41:57
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=deepnorm scheduler.warmup_steps=100 optim=adamw optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 08:42:12
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=rezero scheduler.warmup_steps=0 optim=adamw optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 08:42:27
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model.norm_placement=rezero scheduler.warmup_steps=100 optim=adamw optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 08:42:45
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 'protocol.tune={optim.lr:[1.0e-3,3.0e-3,1.0e-2,3.0e-2,1.0e-1]}' 'hydra.job.config.override_dirname.exclude_keys=[experiment,protocol.tune]' model.norm_placement=pre scheduler.warmup_steps=0 optim=muon optim.lr=0.03 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 08:43:00
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 'protocol.tune={optim.lr:[1.0e-3,3.0e-3,1.0e-2,3.0e-2,1.0e-1]}' 'hydra.job.config.override_dirname.exclude_keys=[experiment,protocol.tune]' model.norm_placement=pre scheduler.warmup_steps=100 optim=muon optim.lr=0.03 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 08:53:27
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 'protocol.tune={optim.lr:[1.0e-3,3.0e-3,1.0e-2,3.0e-2,1.0e-1]}' 'hydra.job.config.override_dirname.exclude_keys=[experiment,protocol.tune]' model.norm_placement=post scheduler.warmup_steps=0 optim=muon optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 09:03:46
python -m src.train -m experiment=study_norm hydra.sweep.dir=/root/studies/norm/cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 'protocol.tune={optim.lr:[1.0e-3,3.0e-3,1.0e-2,3.0e-2,1.0e-1]}' 'hydra.job.config.override_dirname.exclude_keys=[experiment,protocol.tune]' model.norm_placement=post scheduler.warmup_steps=100 optim=muon optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
