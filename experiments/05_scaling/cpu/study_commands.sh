# 2026-12-03 09:19:52
python -m src.train -m experiment=study_scaling hydra.sweep.dir=/root/studies/scaling hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_scaling/arm=pre_learned,post_learned,pre_rope +experiment/study_scaling/size=l2_d32,l2_d48,l3_d64,l4_d80 optim.lr=0.001,0.003,0.01 seed=0 protocol.stage=tune
# 2026-12-03 09:36:13
python -m src.train -m experiment=study_scaling hydra.sweep.dir=/root/studies/scaling hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_scaling/arm=pre_learned +experiment/study_scaling/size=l2_d32 optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 09:36:44
python -m src.train -m experiment=study_scaling hydra.sweep.dir=/root/studies/scaling hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_scaling/arm=pre_learned +experiment/study_scaling/size=l2_d48 optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 09:37:26
python -m src.train -m experiment=study_scaling hydra.sweep.dir=/root/studies/scaling hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_scaling/arm=pre_learned +experiment/study_scaling/size=l3_d64 optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 09:39:21
python -m src.train -m experiment=study_scaling hydra.sweep.dir=/root/studies/scaling hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_scaling/arm=pre_learned,post_learned,pre_rope +experiment/study_scaling/size=l2_d32,l2_d48,l3_d64,l4_d80 optim.lr=0.001,0.003,0.01,0.03 seed=0 protocol.stage=tune
# 2026-12-03 09:46:02
python -m src.train -m experiment=study_scaling hydra.sweep.dir=/root/studies/scaling hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_scaling/arm=pre_learned +experiment/study_scaling/size=l2_d32 optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 09:46:17
python -m src.train -m experiment=study_scaling hydra.sweep.dir=/root/studies/scaling hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_scaling/arm=pre_learned +experiment/study_scaling/size=l2_d48 optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 09:46:32
python -m src.train -m experiment=study_scaling hydra.sweep.dir=/root/studies/scaling hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_scaling/arm=pre_learned +experiment/study_scaling/size=l3_d64 optim.lr=0.03 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 09:47:41
python -m src.train -m experiment=study_scaling hydra.sweep.dir=/root/studies/scaling hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_scaling/arm=pre_learned,post_learned,pre_rope +experiment/study_scaling/size=l2_d32,l2_d48,l3_d64,l4_d80 optim.lr=0.001,0.003,0.01,0.03,0.1 seed=0 protocol.stage=tune
# 2026-12-03 09:55:15
python -m src.train -m experiment=study_scaling hydra.sweep.dir=/root/studies/scaling hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_scaling/arm=pre_learned +experiment/study_scaling/size=l2_d32 optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 09:55:33
python -m src.train -m experiment=study_scaling hydra.sweep.dir=/root/studies/scaling hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_scaling/arm=pre_learned +experiment/study_scaling/size=l2_d48 optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 09:55:51
python -m src.train -m experiment=study_scaling hydra.sweep.dir=/root/studies/scaling hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_scaling/arm=pre_learned +experiment/study_scaling/size=l3_d64 optim.lr=0.03 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 09:57:35
python -m src.train -m experiment=study_scaling hydra.sweep.dir=/root/studies/scaling hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_scaling/arm=pre_learned +experiment/study_scaling/size=l4_d80 optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 10:05:16
python -m src.train -m experiment=study_scaling hydra.sweep.dir=/root/studies/scaling hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_scaling/arm=post_learned +experiment/study_scaling/size=l2_d32 optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 10:05:47
python -m src.train -m experiment=study_scaling hydra.sweep.dir=/root/studies/scaling hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_scaling/arm=post_learned +experiment/study_scaling/size=l2_d48 optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 10:06:33
python -m src.train -m experiment=study_scaling hydra.sweep.dir=/root/studies/scaling hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_scaling/arm=post_learned +experiment/study_scaling/size=l3_d64 optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 10:08:50
python -m src.train -m experiment=study_scaling hydra.sweep.dir=/root/studies/scaling hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_scaling/arm=post_learned +experiment/study_scaling/size=l4_d80 optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 10:16:15
python -m src.train -m experiment=study_scaling hydra.sweep.dir=/root/studies/scaling hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_scaling/arm=pre_rope +experiment/study_scaling/size=l2_d32 optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 10:16:45
python -m src.train -m experiment=study_scaling hydra.sweep.dir=/root/studies/scaling hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_scaling/arm=pre_rope +experiment/study_scaling/size=l2_d48 optim.lr=0.03 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 10:17:31
python -m src.train -m experiment=study_scaling hydra.sweep.dir=/root/studies/scaling hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_scaling/arm=pre_rope +experiment/study_scaling/size=l3_d64 optim.lr=0.03 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 10:19:59
python -m src.train -m experiment=study_scaling hydra.sweep.dir=/root/studies/scaling hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_scaling/arm=pre_rope +experiment/study_scaling/size=l4_d80 optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
