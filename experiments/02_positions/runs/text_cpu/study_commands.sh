# 2026-12-03 14:15:14
python -m src.train -m experiment=study_positions hydra.sweep.dir=/root/studies/positions_text_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model/position=learned,sinusoidal,rope,alibi,t5_bias,none optim.lr=0.003,0.01,0.03 seed=0 protocol.stage=tune
# 2026-12-03 14:57:18
python -m src.train -m experiment=study_positions hydra.sweep.dir=/root/studies/positions_text_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 model/position=learned,sinusoidal,rope,alibi,t5_bias,none optim.lr=0.003,0.01,0.03 seed=0 protocol.stage=tune
