# 2026-12-03 13:09:16
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=copy,reverse,addition,induction model/position=learned,sinusoidal,rope,alibi,t5_bias,none optim.lr=0.0003,0.001,0.003 seed=0 protocol.stage=tune
