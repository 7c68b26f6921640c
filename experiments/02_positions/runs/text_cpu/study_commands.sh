# 2026-12-03 14:15:14
python -m src.train -m experiment=study_positions hydra.sweep.dir=/root/studies/positions_text_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model/position=learned,sinusoidal,rope,alibi,t5_bias,none optim.lr=0.003,0.01,0.03 seed=0 protocol.stage=tune
# 2026-12-03 14:57:18
python -m src.train -m experiment=study_positions hydra.sweep.dir=/root/studies/positions_text_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model/position=learned,sinusoidal,rope,alibi,t5_bias,none optim.lr=0.003,0.01,0.03 seed=0 protocol.stage=tune
# 2026-12-03 17:23:44
python -m src.train -m experiment=study_positions hydra.sweep.dir=/root/studies/positions_text_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 model/position=learned optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 17:24:24
python -m src.train -m experiment=study_positions hydra.sweep.dir=/root/studies/positions_text_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 model/position=learned optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 17:38:06
python -m src.train -m experiment=study_positions hydra.sweep.dir=/root/studies/positions_text_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 model/position=sinusoidal optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 17:52:10
python -m src.train -m experiment=study_positions hydra.sweep.dir=/root/studies/positions_text_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 model/position=rope optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 18:08:13
python -m src.train -m experiment=study_positions hydra.sweep.dir=/root/studies/positions_text_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 model/position=alibi optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 18:19:50
python -m src.train -m experiment=study_positions hydra.sweep.dir=/root/studies/positions_text_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 model/position=t5_bias optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-03 18:34:15
python -m src.train -m experiment=study_positions hydra.sweep.dir=/root/studies/positions_text_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 model/position=none optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
