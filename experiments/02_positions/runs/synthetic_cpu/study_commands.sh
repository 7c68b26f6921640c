# 2026-12-04 03:09:47
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=addition model/position=learned,sinusoidal,rope,alibi,t5_bias,none optim.lr=0.0001,0.0003,0.001,0.003,0.01 seed=0 protocol.stage=tune
# 2026-12-04 03:48:36
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=addition model/position=learned optim.lr=0.001 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 03:55:30
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=addition model/position=sinusoidal optim.lr=0.001 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 04:02:38
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=addition model/position=rope optim.lr=0.001 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 04:10:19
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=addition model/position=alibi optim.lr=0.001 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 04:18:02
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=addition model/position=t5_bias optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 04:25:40
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=addition model/position=none optim.lr=0.001 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 04:33:46
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=copy model/position=learned,sinusoidal,rope,alibi,t5_bias,none optim.lr=0.0001,0.0003,0.001,0.003,0.01 seed=0 protocol.stage=tune
# 2026-12-04 13:11:27
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=copy model/position=learned optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 13:28:09
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=copy model/position=sinusoidal optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 13:44:59
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=copy model/position=rope optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 14:01:32
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=copy model/position=alibi optim.lr=0.0003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 14:17:52
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=copy model/position=t5_bias optim.lr=0.001 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 14:34:34
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=copy model/position=none optim.lr=0.001 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 14:50:18
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=reverse model/position=learned,sinusoidal,rope,alibi,t5_bias,none optim.lr=0.0001,0.0003,0.001,0.003,0.01 seed=0 protocol.stage=tune
# 2026-12-04 16:57:45
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=reverse model/position=learned,sinusoidal,rope,alibi,t5_bias,none optim.lr=0.0001,0.0003,0.001,0.003,0.01 seed=0 protocol.stage=tune
# 2026-12-04 17:09:03
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=reverse model/position=learned optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 17:24:11
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=reverse model/position=sinusoidal optim.lr=0.01 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 17:38:25
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=reverse model/position=rope optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 17:55:31
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=reverse model/position=alibi optim.lr=0.001 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 18:10:37
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=reverse model/position=t5_bias optim.lr=0.001 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 18:26:16
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=reverse model/position=none optim.lr=0.001 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 21:14:34
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=copy_mixed model/position=learned,sinusoidal,rope,alibi,t5_bias,none optim.lr=0.0001,0.0003,0.001,0.003,0.01 seed=0 protocol.stage=tune
# 2026-12-04 21:58:51
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=copy_mixed model/position=learned optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 22:07:09
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=copy_mixed model/position=sinusoidal optim.lr=0.0003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 22:15:45
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=copy_mixed model/position=rope optim.lr=0.001 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 22:24:38
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=copy_mixed model/position=alibi optim.lr=0.0003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 22:33:04
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=copy_mixed model/position=t5_bias optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-04 22:41:33
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=copy_mixed model/position=none optim.lr=0.001 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-05 07:44:46
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=induction model/position=learned,sinusoidal,rope,alibi,t5_bias,none optim.lr=0.0001,0.0003,0.001,0.003,0.01 seed=0 protocol.stage=tune
# 2026-12-05 08:55:41
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=induction model/position=learned,sinusoidal,rope,alibi,t5_bias,none optim.lr=0.0001,0.0003,0.001,0.003,0.01 seed=0 protocol.stage=tune
# 2026-12-05 08:56:15
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=induction model/position=learned optim.lr=0.0003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-05 09:09:44
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=induction model/position=sinusoidal optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-05 09:23:23
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=induction model/position=rope optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-05 09:37:34
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=induction model/position=alibi optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-05 09:51:13
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=induction model/position=t5_bias optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-05 10:04:39
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=induction model/position=none optim.lr=0.001 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-05 10:39:08
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=mqar model/position=learned,sinusoidal,rope,alibi,t5_bias,none optim.lr=0.0001,0.0003,0.001,0.003,0.01 seed=0 protocol.stage=tune
# 2026-12-05 13:03:46
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=mqar model/position=learned,sinusoidal,rope,alibi,t5_bias,none optim.lr=0.0001,0.0003,0.001,0.003,0.01 seed=0 protocol.stage=tune
# 2026-12-05 13:11:05
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=copy_mixed_deep model/position=learned,sinusoidal,rope,alibi,t5_bias,none optim.lr=0.0003,0.001,0.003 seed=0 protocol.stage=tune
# 2026-12-05 13:12:19
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=mqar model/position=learned optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-05 13:15:53
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=mqar model/position=sinusoidal optim.lr=0.001 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-05 13:19:26
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=mqar model/position=rope optim.lr=0.003 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-05 13:22:55
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=mqar model/position=alibi optim.lr=0.001 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-05 13:26:11
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=mqar model/position=t5_bias optim.lr=0.001 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-05 13:29:26
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=mqar model/position=none optim.lr=0.001 seed=1,2,3,4,5 protocol.stage=confirm
# 2026-12-05 23:14:48
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/root/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=copy_mixed_deep model/position=learned,sinusoidal,rope,alibi,t5_bias,none optim.lr=0.0003,0.001,0.003 seed=0 protocol.stage=tune
# 2026-12-06 02:22:09
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=learned optim.lr=0.003 seed=1 protocol.stage=confirm
# 2026-12-06 02:33:37
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=sinusoidal optim.lr=0.0003 seed=1 protocol.stage=confirm
# 2026-12-06 02:44:35
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=rope optim.lr=0.001 seed=1 protocol.stage=confirm
# 2026-12-06 02:56:21
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=learned optim.lr=0.003 seed=2 protocol.stage=confirm
# 2026-12-06 03:07:04
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=sinusoidal optim.lr=0.0003 seed=2 protocol.stage=confirm
# 2026-12-06 03:18:08
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=rope optim.lr=0.001 seed=2 protocol.stage=confirm
# 2026-12-06 03:30:27
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=learned optim.lr=0.003 seed=3 protocol.stage=confirm
# 2026-12-06 03:41:13
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=sinusoidal optim.lr=0.0003 seed=3 protocol.stage=confirm
# 2026-12-06 03:51:57
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=rope optim.lr=0.001 seed=3 protocol.stage=confirm
# 2026-12-06 04:03:39
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=learned optim.lr=0.003 seed=4 protocol.stage=confirm
# 2026-12-06 02:22:09
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=alibi optim.lr=0.003 seed=1 protocol.stage=confirm
# 2026-12-06 02:33:47
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=t5_bias optim.lr=0.003 seed=1 protocol.stage=confirm
# 2026-12-06 02:45:05
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=none optim.lr=0.001 seed=1 protocol.stage=confirm
# 2026-12-06 02:56:15
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=alibi optim.lr=0.003 seed=2 protocol.stage=confirm
# 2026-12-06 03:07:32
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=t5_bias optim.lr=0.003 seed=2 protocol.stage=confirm
# 2026-12-06 03:19:06
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=none optim.lr=0.001 seed=2 protocol.stage=confirm
# 2026-12-06 03:30:47
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=alibi optim.lr=0.003 seed=3 protocol.stage=confirm
# 2026-12-06 03:41:40
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=t5_bias optim.lr=0.003 seed=3 protocol.stage=confirm
# 2026-12-06 03:52:42
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=none optim.lr=0.001 seed=3 protocol.stage=confirm
# 2026-12-06 04:03:42
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=alibi optim.lr=0.003 seed=4 protocol.stage=confirm
# 2026-12-06 05:13:17
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=sinusoidal optim.lr=0.0003 seed=4 protocol.stage=confirm
# 2026-12-06 05:24:10
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=rope optim.lr=0.001 seed=4 protocol.stage=confirm
# 2026-12-06 05:35:52
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=learned optim.lr=0.003 seed=5 protocol.stage=confirm
# 2026-12-06 05:46:47
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=sinusoidal optim.lr=0.0003 seed=5 protocol.stage=confirm
# 2026-12-06 05:57:17
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=rope optim.lr=0.001 seed=5 protocol.stage=confirm
# 2026-12-06 05:13:17
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=t5_bias optim.lr=0.003 seed=4 protocol.stage=confirm
# 2026-12-06 05:24:14
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=none optim.lr=0.001 seed=4 protocol.stage=confirm
# 2026-12-06 05:35:22
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=alibi optim.lr=0.003 seed=5 protocol.stage=confirm
# 2026-12-06 05:46:37
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=t5_bias optim.lr=0.003 seed=5 protocol.stage=confirm
# 2026-12-06 05:57:19
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_mixed_deep model/position=none optim.lr=0.001 seed=5 protocol.stage=confirm
# 2026-12-06 13:12:06
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=2 +experiment/study_length_generalization/task=copy_binary model/position=learned,sinusoidal,rope,alibi,t5_bias,none optim.lr=0.0003,0.001,0.003 seed=0 protocol.stage=tune
# 2026-12-06 18:17:10
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=alibi optim.lr=0.001 seed=1 protocol.stage=confirm
# 2026-12-06 18:17:30
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=none optim.lr=0.001 seed=1 protocol.stage=confirm
# 2026-12-06 18:27:34
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=sinusoidal optim.lr=0.0003 seed=1 protocol.stage=confirm
# 2026-12-06 18:28:12
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=t5_bias optim.lr=0.001 seed=1 protocol.stage=confirm
# 2026-12-06 18:38:17
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=alibi optim.lr=0.001 seed=2 protocol.stage=confirm
# 2026-12-06 18:38:53
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=none optim.lr=0.001 seed=2 protocol.stage=confirm
# 2026-12-06 18:48:17
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=sinusoidal optim.lr=0.0003 seed=2 protocol.stage=confirm
# 2026-12-06 18:48:50
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=t5_bias optim.lr=0.001 seed=2 protocol.stage=confirm
# 2026-12-06 18:58:15
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=alibi optim.lr=0.001 seed=3 protocol.stage=confirm
# 2026-12-06 18:59:10
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=none optim.lr=0.001 seed=3 protocol.stage=confirm
# 2026-12-06 19:08:38
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=sinusoidal optim.lr=0.0003 seed=3 protocol.stage=confirm
# 2026-12-06 19:09:34
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=t5_bias optim.lr=0.001 seed=3 protocol.stage=confirm
# 2026-12-06 19:19:21
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=alibi optim.lr=0.001 seed=4 protocol.stage=confirm
# 2026-12-06 19:20:37
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=none optim.lr=0.001 seed=4 protocol.stage=confirm
# 2026-12-06 19:29:57
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=sinusoidal optim.lr=0.0003 seed=4 protocol.stage=confirm
# 2026-12-06 19:30:52
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=t5_bias optim.lr=0.001 seed=4 protocol.stage=confirm
# 2026-12-06 19:40:33
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=alibi optim.lr=0.001 seed=5 protocol.stage=confirm
# 2026-12-06 19:41:48
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=none optim.lr=0.001 seed=5 protocol.stage=confirm
# 2026-12-06 19:51:24
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=sinusoidal optim.lr=0.0003 seed=5 protocol.stage=confirm
# 2026-12-06 19:52:20
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=t5_bias optim.lr=0.001 seed=5 protocol.stage=confirm
# 2026-12-06 20:02:59
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=learned optim.lr=0.001 seed=1 protocol.stage=confirm
# 2026-12-06 20:03:57
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=rope optim.lr=0.003 seed=1 protocol.stage=confirm
# 2026-12-06 20:20:21
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=learned optim.lr=0.001 seed=2 protocol.stage=confirm
# 2026-12-06 20:31:31
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=rope optim.lr=0.003 seed=2 protocol.stage=confirm
# 2026-12-06 20:43:23
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=learned optim.lr=0.001 seed=3 protocol.stage=confirm
# 2026-12-06 21:30:34
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=learned optim.lr=0.001 seed=4 protocol.stage=confirm
# 2026-12-06 21:30:53
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=learned optim.lr=0.001 seed=5 protocol.stage=confirm
# 2026-12-06 21:41:21
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=rope optim.lr=0.003 seed=3 protocol.stage=confirm
# 2026-12-06 21:41:37
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu_b hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=rope optim.lr=0.003 seed=4 protocol.stage=confirm
# 2026-12-06 21:52:42
python -m src.train -m experiment=study_length_generalization hydra.sweep.dir=/work/studies/positions_synthetic_cpu hydra/launcher=joblib hydra.launcher.n_jobs=1 +experiment/study_length_generalization/task=copy_binary model/position=rope optim.lr=0.003 seed=5 protocol.stage=confirm
