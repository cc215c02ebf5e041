"""clientmetrics.store: durable client-metrics subscriptions behind one small interface."""

from clientmetrics.store.base import ChangeListener, ConfigMap, StoreError, SubscriptionStore
from clientmetrics.store.memory import MemorySubscriptionStore
from clientmetrics.store.sqlite import SqliteSubscriptionStore

__all__ = [
    "ChangeListener",
    "ConfigMap",
    "MemorySubscriptionStore",
    "SqliteSubscriptionStore",
    "StoreError",
    "SubscriptionStore",
]
