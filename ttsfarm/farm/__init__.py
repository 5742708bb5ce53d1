"""What producers, workers and the gateway share about the farm: the Celery configuration
(``celeryconf``) and the job registry in Redis (``registry``). With ``producer.client`` and
``worker``, the only modules that import Celery, kombu or redis.
"""
